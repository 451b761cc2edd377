"""Which ranks of a torch.distributed group share a node: one quickreduce
group per node, the ranks of equal local rank across nodes for the cross-node
leg (docs/distributed.md)."""

import os
import socket

from ..errors import InvalidArgument


class Layout:
    """Where `rank` sits: node `node` of `num_nodes`, local rank `local_rank`
    of `local_size`, with its node's ranks `local_ranks`, the ranks of the
    same local rank on every node, `cross_ranks` (in node order), and every
    node's ranks in local order, `node_ranks` (node_ranks[k][l] is the rank
    at local rank l of node k)."""

    __slots__ = ("rank", "node", "num_nodes", "local_rank", "local_size", "local_ranks",
                 "cross_ranks", "node_ranks", "node_id")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)

    def __repr__(self):
        return "<Layout rank %d: node %d/%d (%s), local %d/%d>" % (
            self.rank, self.node, self.num_nodes, self.node_id, self.local_rank, self.local_size)


def node_id():
    """QR_NODE_ID, else the host name."""
    return os.environ.get("QR_NODE_ID") or socket.gethostname()


def layout_of(ids, rank):
    """The Layout of `rank` given every rank's node id (ids[r]). Nodes are
    numbered in the order of their first rank. Raises InvalidArgument when the
    nodes hold different numbers of ranks."""
    nodes = []
    for i in ids:
        if i not in nodes:
            nodes.append(i)
    members = {n: [r for r, i in enumerate(ids) if i == n] for n in nodes}
    sizes = sorted({len(m) for m in members.values()})
    if len(sizes) != 1:
        raise InvalidArgument(
            "quickreduce: every node must hold the same number of ranks, but %s"
            % ", ".join("node %r has %d (ranks %s)" % (n, len(m), m) for n, m in members.items()))
    mine = ids[rank]
    local = members[mine]
    local_rank = local.index(rank)
    return Layout(rank=rank, node=nodes.index(mine), num_nodes=len(nodes), local_rank=local_rank,
                  local_size=len(local), local_ranks=local,
                  cross_ranks=[members[n][local_rank] for n in nodes],
                  node_ranks=[members[n] for n in nodes], node_id=mine)


def exchange_layout(store, rank, world_size, prefix="qr/node/"):
    """Every rank publishes its node id in the torch.distributed store and
    reads everyone's (store.get waits for the key): the same Layout inputs on
    every rank."""
    store.set(prefix + str(rank), node_id())
    ids = [store.get(prefix + str(r)).decode() for r in range(world_size)]
    return layout_of(ids, rank)
