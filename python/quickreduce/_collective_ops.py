"""The torch ops' reduce-scatter and all-gather (ops.py registers them):

    torch.ops.quickreduce.reduce_scatter(tensor, world_size, group_name) -> Tensor
    torch.ops.quickreduce.all_gather(tensor, world_size, group_name) -> Tensor

Along dimension 0, as torch.distributed's reduce_scatter_tensor /
all_gather_into_tensor: reduce_scatter takes world_size * m rows and returns
this rank's m rows of the sum; all_gather takes m rows and returns world_size
* m. world_size is in the schema so that the fake (meta) implementations know
the output's shape without a communicator. As for all_reduce, the choice
between quickreduce (the communicator named group_name, when it takes the
tensor) and the registered torch.distributed fallback is made each time the op
runs."""

import torch

from . import _collectives
from .communicator import fallback_for, lookup
from .errors import InvalidArgument


def _rows(tensor, world_size, gather):
    if tensor.dim() == 0:
        raise InvalidArgument("quickreduce: a 0-d tensor has no dimension to split or gather")
    shape = list(tensor.shape)
    if gather:
        shape[0] *= world_size
    else:
        if shape[0] % world_size:
            raise InvalidArgument("quickreduce.reduce_scatter: dimension 0 (%d) is not a multiple "
                                  "of the world size %d" % (shape[0], world_size))
        shape[0] //= world_size
    return shape


def _decide(tensor, world_size, group_name, gather, what):
    comm = lookup(group_name)
    if comm is not None and comm.world_size != world_size:
        raise InvalidArgument("quickreduce.%s: %r has world size %d, not %d"
                              % (what, group_name, comm.world_size, world_size))
    if comm is not None and _collectives.should_run(comm, tensor, gather):
        return comm, None
    pg = fallback_for(group_name)
    if pg is None:
        raise InvalidArgument("quickreduce.%s: %r %s this tensor and no fallback group is "
                              "registered (register_fallback)"
                              % (what, group_name, "is not open" if comm is None else
                                 "declines"))
    return None, pg


def reduce_scatter_impl(tensor, world_size, group_name):
    shape = _rows(tensor, world_size, gather=False)
    comm, pg = _decide(tensor, world_size, group_name, False, "reduce_scatter")
    out = torch.empty(shape, dtype=tensor.dtype, device=tensor.device)
    if comm is not None:
        return comm.reduce_scatter(tensor, out=out)
    import torch.distributed as dist
    fn = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    fn(out, tensor.contiguous(), group=pg)
    return out


def all_gather_impl(tensor, world_size, group_name):
    shape = _rows(tensor, world_size, gather=True)
    comm, pg = _decide(tensor, world_size, group_name, True, "all_gather")
    out = torch.empty(shape, dtype=tensor.dtype, device=tensor.device)
    if comm is not None:
        return comm.all_gather(tensor, out=out)
    import torch.distributed as dist
    fn = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
    fn(out, tensor.contiguous(), group=pg)
    return out


def reduce_scatter_fake(tensor, world_size, group_name):
    return tensor.new_empty(_rows(tensor, world_size, gather=False))


def all_gather_fake(tensor, world_size, group_name):
    return tensor.new_empty(_rows(tensor, world_size, gather=True))


SCHEMAS = {
    "reduce_scatter": "reduce_scatter(Tensor tensor, int world_size, str group_name) -> Tensor",
    "all_gather": "all_gather(Tensor tensor, int world_size, str group_name) -> Tensor",
}
IMPLS = {"reduce_scatter": reduce_scatter_impl, "all_gather": all_gather_impl}
FAKES = {"reduce_scatter": reduce_scatter_fake, "all_gather": all_gather_fake}
