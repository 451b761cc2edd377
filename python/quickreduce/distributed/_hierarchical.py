"""The collectives of a job that spans nodes (docs/distributed.md): one
quickreduce group per node, and a cross-node leg through the delegate group
of the ranks of equal local rank (gloo for CPU tensors, NCCL for CUDA ones).

Rank r's chunk of a reduce-scatter or all-gather is [r * n, (r + 1) * n) of
the whole message, and ranks need not be numbered node by node, so both
work on the message in local-rank-major order: P[l][k] is the chunk of rank
node_ranks[k][l]. Reduce-scatter: the node reduce-scatters P (local rank l
keeps row P[l], summed over the node, in the configured regime), then the
ranks of local rank l reduce-scatter that row across nodes (node k keeps
P[l][k], its own chunk). All-gather runs the other way: across nodes (the
row of local rank l), in the node, back to rank order.

The delegates' reduce-scatter and all-gather fall back to an all-reduce
and to the list all-gather where the group has none (gloo before torch 2)."""

import re

import torch
import torch.distributed as dist

from .. import _collectives


# What gloo before torch 2 raises for a collective it lacks ("ProcessGroupGloo
# does not support reduce_scatter", "no support for _allgather_base in Gloo
# process group").
_LACKS = re.compile(r"(does not|no) support")


def chunk_order(layout):
    """The rank whose chunk sits at each position of the permuted message."""
    return [layout.node_ranks[k][l] for l in range(layout.local_size)
            for k in range(layout.num_nodes)]


def _rows(flat, n):
    return flat.view(-1, n)


def reduce_scatter_via(group, output, input, opts, index):
    """group's reduce-scatter of input into output, where index is this
    rank's position in group; an all-reduce of a copy where group has no
    reduce-scatter. Returns the group's Work."""
    try:
        return group._reduce_scatter_base(output, input, opts)
    except RuntimeError as e:
        if not _LACKS.search(str(e)):
            raise
    tmp = input.contiguous().clone()
    ar = dist.AllreduceOptions()
    ar.reduceOp = opts.reduceOp
    work = group.allreduce([tmp], ar)
    work.wait()
    m = output.numel()
    output.view(-1).copy_(tmp.view(-1)[index * m:(index + 1) * m])
    return work


def all_gather_via(group, output, input, opts, size):
    """group's all-gather of input into output (size ranks); the list
    all-gather into views of output where group has no flat one. 16-bit
    values travel as int16 bits (an exact copy either way), which gloo before
    bfloat16 travels as float16 bits (a copy either way is exact): gloo
    before torch 2 refuses bfloat16 (and int16)."""
    if input.dtype == torch.bfloat16 and output.dtype == input.dtype:
        output, input = output.view(torch.float16), input.view(torch.float16)
    try:
        return group._allgather_base(output, input) if opts is None else \
            group._allgather_base(output, input, opts)
    except RuntimeError as e:
        if not _LACKS.search(str(e)):
            raise
    work = group.allgather([list(output.view(-1).chunk(size))], [input.contiguous().view(-1)])
    work.wait()
    return work


def all_reduce(pg, comm, t):
    """Reduce-scatter in the node (configured regime), all-reduce of the
    shard across nodes, all-gather in the node (FP, exact). False (nothing
    done) when quickreduce would not run the node's legs."""
    lay = pg.layout
    flat = t.view(-1)
    m = flat.numel() // lay.local_size
    if m * lay.local_size != flat.numel() or not _collectives.should_run(comm, flat, False):
        return False
    lo = lay.local_rank * m
    shard = flat[lo:lo + m]
    comm.reduce_scatter(flat, out=shard)  # in place: this rank's slice
    pg.cross_group(t).allreduce([shard]).wait()
    comm.all_gather(shard, out=flat, regime="FP")  # in place, exact
    return True


def reduce_scatter(pg, comm, output, input, opts):
    """False (nothing done) when quickreduce would not run the node's leg."""
    lay = pg.layout
    n = output.numel()
    if input.numel() != n * pg.size() or not _collectives.should_run(comm, input, False):
        return False
    order = torch.tensor(chunk_order(lay), device=input.device)
    perm = _rows(input.reshape(-1), n).index_select(0, order).view(-1)
    row = torch.empty(lay.num_nodes * n, dtype=input.dtype, device=input.device)
    comm.reduce_scatter(perm, out=row)
    reduce_scatter_via(pg.cross_group(input), output.view(-1), row, opts, lay.node).wait()
    return True


def all_gather(pg, comm, output, input, opts):
    """False (nothing done) when quickreduce would not run the node's leg."""
    lay = pg.layout
    n = input.numel()
    if output.numel() != n * pg.size():
        return False
    row = torch.empty(lay.num_nodes * n, dtype=input.dtype, device=input.device)
    if not _collectives.should_run(comm, row, True):
        return False
    all_gather_via(pg.cross_group(input), row, input.reshape(-1), opts, lay.num_nodes).wait()
    perm = torch.empty(output.numel(), dtype=input.dtype, device=input.device)
    comm.all_gather(row, out=perm)
    order = torch.tensor(chunk_order(lay), device=input.device)
    _rows(output.view(-1), n).index_copy_(0, order, _rows(perm, n))
    return True
