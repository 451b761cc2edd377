"""The torch.distributed backend "quickreduce" on CPU tensors (host backend):
`import quickreduce.distributed` registers it; fp16/bf16 SUM all_reduce,
reduce_scatter_tensor and all_gather_into_tensor run through quickreduce and
everything else through the gloo group beside it; ranks with the same
QR_NODE_ID form one quickreduce group, and across (simulated) nodes all_reduce
is reduce-scatter in the node, gloo across, all-gather in the node. The
backend API followed is torch's own: Backend.register_backend (creator
function (store, rank, size, timeout); `devices` from torch 2.1) and a
Python subclass of ProcessGroup returned as the group itself, as
torch/distributed/distributed_c10d.py _new_process_group_helper does for
"a subclass of ProcessGroup" (pytorch/pytorch@024070f4c0cd0efad7ddf2a0b3cc714aa5df1318,
test/distributed/test_c10d_pypg.py shows such groups)."""

import os
import tempfile

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from harness import run_processes  # noqa: E402
from quickreduce.distributed import layout_of  # noqa: E402
from quickreduce.errors import InvalidArgument  # noqa: E402


def _x(rank, n, dtype, seed=0):
    g = torch.Generator().manual_seed(seed * 10 + rank)
    return torch.randn(n, generator=g).to(dtype)


def _init(rank, ws, path, node):
    os.environ["QR_NODE_ID"] = node
    import quickreduce.distributed  # noqa: F401  (registers the backend)
    dist.init_process_group(backend="quickreduce", init_method="file://" + path, rank=rank,
                            world_size=ws)


def _two_nodes(rank, path, n):
    _init(rank, 4, path, "node-a" if rank < 2 else "node-b")
    pg = dist.distributed_c10d._get_default_group()
    out = {"layout": (pg.layout.node, pg.layout.local_rank, pg.layout.local_size,
                      pg.layout.num_nodes)}
    x = _x(rank, n, torch.float16)
    dist.all_reduce(x)
    out["hier"] = x.view(torch.int16).tolist()
    out["joined"] = sorted(pg._comms)  # a quickreduce group formed (host backend)
    f = _x(rank, 64, torch.float32)
    dist.all_reduce(f)
    out["fp32"] = f.tolist()
    m = _x(rank, 64, torch.float16)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    out["max"] = m.view(torch.int16).tolist()
    b = torch.full((16,), float(rank), dtype=torch.float16)
    dist.broadcast(b, src=3)
    out["bcast"] = b.tolist()
    rs_out = torch.empty(16, dtype=torch.float16)
    fn = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    fn(rs_out, torch.full((64,), float(rank + 1), dtype=torch.float16))
    out["rs"] = rs_out.tolist()
    dist.barrier()
    dist.destroy_process_group()
    return out


def test_layout_of_nodes():
    lay = layout_of(["a", "a", "b", "b"], 3)
    assert (lay.node, lay.num_nodes, lay.local_rank, lay.local_size) == (1, 2, 1, 2)
    assert lay.local_ranks == [2, 3] and lay.cross_ranks == [1, 3]
    lay = layout_of(["h"] * 8, 5)
    assert (lay.node, lay.num_nodes, lay.local_rank, lay.local_size) == (0, 1, 5, 8)
    with pytest.raises(InvalidArgument, match="same number of ranks"):
        layout_of(["a", "a", "a", "b"], 0)


def test_two_simulated_nodes_hierarchical_all_reduce():
    n = 4096
    path = tempfile.mktemp(prefix="qrdist-")
    results = run_processes(4, _two_nodes, path, n, timeout=240)
    xs = [_x(r, n, torch.float16).float() for r in range(4)]
    # Reduce-scatter in each node (FP: the fp32 sum rounded once), gloo's
    # fp16 sum of the two nodes' shards, the exact all-gather.
    a = (xs[0] + xs[1]).half().float()
    b = (xs[2] + xs[3]).half().float()
    want = (a + b).half().view(torch.int16).tolist()
    fs = [_x(r, 64, torch.float32) for r in range(4)]
    ms = [_x(r, 64, torch.float16) for r in range(4)]
    for rank, out in enumerate(results):
        assert out["layout"] == (rank // 2, rank % 2, 2, 2)
        assert out["joined"] == [("cpu", None)]
        assert out["hier"] == want
        assert out["fp32"] == pytest.approx((fs[0] + fs[1] + fs[2] + fs[3]).tolist(), rel=1e-5)
        assert out["max"] == torch.stack(ms).max(0).values.view(torch.int16).tolist()
        assert out["bcast"] == [3.0] * 16
        assert out["rs"] == [10.0] * 16  # across nodes: gloo


def _nodes_collectives(rank, path, nodes):
    """reduce_scatter_tensor and all_gather_into_tensor across 2 simulated
    nodes; nodes[r] is rank r's node id. Counts the node legs quickreduce ran."""
    from quickreduce.communicator import Communicator
    legs = []
    for name in ("reduce_scatter", "all_gather"):
        def spy(self, *a, _f=getattr(Communicator, name), _n=name, **kw):
            legs.append(_n)
            return _f(self, *a, **kw)
        setattr(Communicator, name, spy)
    _init(rank, 4, path, nodes[rank])
    out = {}
    rs = torch.empty(1024, dtype=torch.float16)
    rs_fn = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    rs_fn(rs, _x(rank, 4096, torch.float16, seed=4))
    out["rs"] = rs.view(torch.int16).tolist()
    ag = torch.empty(4 * 72, dtype=torch.bfloat16)
    ag_fn = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
    ag_fn(ag, _x(rank, 72, torch.bfloat16, seed=5))
    out["ag"] = ag.view(torch.int16).tolist()
    # An fp32 reduce-scatter is not quickreduce's: the delegate, exact order.
    rs32 = torch.empty(8, dtype=torch.float32)
    rs_fn(rs32, torch.full((32,), float(rank + 1)))
    out["rs32"] = rs32.tolist()
    out["legs"] = legs
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("nodes", [["a", "a", "b", "b"], ["a", "b", "a", "b"]],
                         ids=["node-major", "interleaved"])
def test_two_simulated_nodes_reduce_scatter_and_all_gather(nodes):
    path = tempfile.mktemp(prefix="qrdist-")
    results = run_processes(4, _nodes_collectives, path, nodes, timeout=240)
    xs = [_x(r, 4096, torch.float16, seed=4).float() for r in range(4)]
    members = {k: [r for r in range(4) if nodes[r] == k] for k in ("a", "b")}
    # In each node the FP reduce-scatter rounds the fp32 sum once; across
    # nodes gloo adds the two fp16 partial sums (one rounding).
    part = {k: (xs[m[0]] + xs[m[1]]).half().float() for k, m in members.items()}
    tot = (part["a"] + part["b"]).half()
    ags = torch.cat([_x(r, 72, torch.bfloat16, seed=5) for r in range(4)])
    for rank, out in enumerate(results):
        assert out["rs"] == tot[rank * 1024:(rank + 1) * 1024].view(torch.int16).tolist()
        assert out["ag"] == ags.view(torch.int16).tolist()
        assert out["rs32"] == [10.0] * 8
        assert out["legs"] == ["reduce_scatter", "all_gather"]


def _one_node(rank, path, ws):
    _init(rank, ws, path, "one")
    pg = dist.distributed_c10d._get_default_group()
    out = {}
    x = _x(rank, 8192 + 8 * ws, torch.bfloat16, seed=1)
    dist.all_reduce(x)
    out["ar"] = x.view(torch.int16).tolist()
    rs = torch.empty(1024, dtype=torch.float16)
    full = _x(rank, 1024 * ws, torch.float16, seed=2)
    fn = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    fn(rs, full)
    out["rs"] = rs.view(torch.int16).tolist()
    ag = torch.empty(ws * 40, dtype=torch.bfloat16)
    fn = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
    fn(ag, _x(rank, 40, torch.bfloat16, seed=3))
    out["ag"] = ag.view(torch.int16).tolist()
    out["joined"] = sorted(pg._comms)
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("ws", [2, 4])
def test_single_node_runs_quickreduce(ws):
    path = tempfile.mktemp(prefix="qrdist-")
    results = run_processes(ws, _one_node, path, ws, timeout=240)
    xs = [_x(r, 8192 + 8 * ws, torch.bfloat16, seed=1).float() for r in range(ws)]
    acc = xs[0]
    for v in xs[1:]:
        acc = acc + v  # the fp32 left fold in rank order, rounded once (FP)
    fulls = [_x(r, 1024 * ws, torch.float16, seed=2).float() for r in range(ws)]
    tot = fulls[0]
    for v in fulls[1:]:
        tot = tot + v
    tot = tot.half()
    ags = torch.cat([_x(r, 40, torch.bfloat16, seed=3) for r in range(ws)])
    for rank, out in enumerate(results):
        assert out["joined"] == [("cpu", None)]
        assert out["ar"] == acc.bfloat16().view(torch.int16).tolist()
        assert out["rs"] == tot[rank * 1024:(rank + 1) * 1024].view(torch.int16).tolist()
        assert out["ag"] == ags.view(torch.int16).tolist()


def _uneven(rank, path):
    try:
        _init(rank, 4, path, "a" if rank < 3 else "b")
    except Exception as e:  # the error init_process_group raises
        return str(e)
    return "no error"


def test_unequal_ranks_per_node_fail_at_init():
    path = tempfile.mktemp(prefix="qrdist-")
    for text in run_processes(4, _uneven, path, timeout=120):
        assert "same number of ranks" in text


class _GpuComm:
    """A node communicator that says it is on GPU 0 and records its calls."""
    device, closed, world_size = 0, False, 2

    def __init__(self):
        self.calls = []

    def reduce_scatter(self, x, out=None, **kw):
        self.calls.append("reduce_scatter")
        return out

    def all_gather(self, x, out=None, **kw):
        self.calls.append("all_gather")
        return out


@pytest.mark.parametrize("num_nodes", [1, 2])
def test_gpu_communicators_run_the_collectives(monkeypatch, num_nodes):
    """reduce_scatter_tensor, all_gather_into_tensor and (across nodes) the
    hierarchical all_reduce go to the node's GPU communicator as to a host
    one: the GPU reduce-scatter / all-gather kernels passed on hardware
    (docs/collectives.md "GPU kernels"), so no device gate sends CUDA tensors
    to the delegate. The GPU run itself is gpu/test_distributed_gpu.py."""
    from types import SimpleNamespace
    from quickreduce.distributed import _process_group as pgm
    PG = pgm.QuickReduceProcessGroup
    comm, legs = _GpuComm(), []
    for name in ("reduce_scatter", "all_gather", "all_reduce"):
        def leg(pg, c, *a, _n=name):
            legs.append((_n, c.device))
            return True
        monkeypatch.setattr(pgm._hierarchical, name, leg)
    monkeypatch.setattr(pgm._collectives, "should_run", lambda *a, **k: True)

    class Group:
        layout = SimpleNamespace(num_nodes=num_nodes, local_size=2)
        _collective_comm = PG._collective_comm
        _try_all_reduce = PG._try_all_reduce

        def communicator(self, t):
            return comm

        def _delegate(self, t):
            raise AssertionError("the delegate ran a call quickreduce takes")

    g = Group()
    PG._reduce_scatter_base(g, torch.empty(8, dtype=torch.float16),
                            torch.zeros(16, dtype=torch.float16))
    PG._allgather_base(g, torch.empty(16, dtype=torch.bfloat16),
                       torch.zeros(8, dtype=torch.bfloat16))
    if num_nodes == 1:
        assert comm.calls == ["reduce_scatter", "all_gather"] and legs == []
    else:
        assert g._try_all_reduce(torch.zeros(16, dtype=torch.float16))
        assert comm.calls == [] and \
            legs == [("reduce_scatter", 0), ("all_gather", 0), ("all_reduce", 0)]
