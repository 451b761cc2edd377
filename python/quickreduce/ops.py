"""torch.library ops over the Communicator, for torch.compile and CUDA graphs:

    torch.ops.quickreduce.all_reduce(tensor, group_name) -> Tensor   # out-of-place
    torch.ops.quickreduce.all_reduce_(tensor, group_name) -> ()      # in place
    torch.ops.quickreduce.reduce_scatter(tensor, world_size, group_name) -> Tensor
    torch.ops.quickreduce.all_gather(tensor, world_size, group_name) -> Tensor
      (along dimension 0; _collective_ops.py)
    torch.ops.quickreduce.all_reduce_residual_rmsnorm(_fp8), all_reduce_residual_rmsnorm_
      (the fused layer boundary; _fused_ops.py)

`group_name` names an open Communicator of this process (its `name`, by
default its group). The
choice between quickreduce and the fallback is made inside the op each time
it runs, never frozen into a compiled graph: quickreduce when the communicator
exists and should_all_reduce(tensor) holds, else torch.distributed.all_reduce
on the process group registered for that name (register_fallback, or
Communicator.from_process_group), else an error. Inference only: no autograd.

Registered with Library.define/impl (cheaper to dispatch than custom_op),
with fake (meta) implementations through register_fake where this torch has
it (>= 2.4), impl_abstract (2.1-2.3), else a Meta kernel (1.13).
"""

import torch

from . import _collective_ops, _fused_ops
from .communicator import fallback_for, lookup
from .errors import InvalidArgument

__all__ = ["all_reduce", "all_reduce_", "all_reduce_residual_rmsnorm",
           "all_reduce_residual_rmsnorm_", "all_reduce_residual_rmsnorm_fp8", "reduce_scatter",
           "all_gather", "LIBRARY"]

_NS = "quickreduce"


def _decide(tensor, group_name):
    comm = lookup(group_name)
    if comm is not None and not comm.closed and comm.should_all_reduce(tensor):
        return comm, None
    pg = fallback_for(group_name)
    if pg is None:
        if comm is None:
            raise InvalidArgument("quickreduce.all_reduce: no communicator named %r is open in "
                                  "this process and no fallback group is registered"
                                  % group_name)
        raise InvalidArgument("quickreduce.all_reduce: %r declines this tensor (%s %s, %d bytes) "
                              "and no fallback group is registered (register_fallback)"
                              % (group_name, tuple(tensor.shape), tensor.dtype,
                                 tensor.numel() * tensor.element_size()))
    return None, pg


def _all_reduce_impl(tensor, group_name):
    comm, pg = _decide(tensor, group_name)
    if comm is not None:
        return comm.all_reduce(tensor)
    import torch.distributed as dist
    out = tensor.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(out, group=pg)
    return out


def _all_reduce_inplace_impl(tensor, group_name):
    comm, pg = _decide(tensor, group_name)
    if comm is not None:
        comm.all_reduce(tensor, out=tensor)
        return
    import torch.distributed as dist
    dist.all_reduce(tensor, group=pg)


def _fake(tensor, group_name):
    return torch.empty_like(tensor)


def _fake_inplace(tensor, group_name):
    return None


def _tags():
    tag = getattr(torch, "Tag", None)
    if tag is not None and hasattr(tag, "pt2_compliant_tag"):
        return (tag.pt2_compliant_tag,)
    return ()


def _register():
    lib = torch.library.Library(_NS, "DEF")
    schemas = {"all_reduce": "all_reduce(Tensor tensor, str group_name) -> Tensor",
               "all_reduce_": "all_reduce_(Tensor(a!) tensor, str group_name) -> ()",
               **_fused_ops.SCHEMAS}
    schemas.update(_collective_ops.SCHEMAS)
    tags = _tags()
    for schema in schemas.values():
        if tags:
            try:
                lib.define(schema, tags=tags)
                continue
            except TypeError:  # define() without tags= (older torch)
                pass
        lib.define(schema)
    for key in ("CPU", "CUDA"):
        lib.impl("all_reduce", _all_reduce_impl, key)
        lib.impl("all_reduce_", _all_reduce_inplace_impl, key)
        lib.impl("all_reduce_residual_rmsnorm", _fused_ops.fused_impl(_decide), key)
        lib.impl("all_reduce_residual_rmsnorm_", _fused_ops.fused_inplace_impl(_decide), key)
        lib.impl("all_reduce_residual_rmsnorm_fp8", _fused_ops.fused_fp8_impl(_decide), key)
        for name, fn in _collective_ops.IMPLS.items():
            lib.impl(name, fn, key)
    register_fake = getattr(torch.library, "register_fake", None) or \
        getattr(torch.library, "impl_abstract", None)
    if register_fake is not None:
        register_fake(_NS + "::all_reduce", _fake, lib=lib)
        register_fake(_NS + "::all_reduce_", _fake_inplace, lib=lib)
        register_fake(_NS + "::all_reduce_residual_rmsnorm", _fused_ops.fake, lib=lib)
        register_fake(_NS + "::all_reduce_residual_rmsnorm_", _fused_ops.fake_inplace, lib=lib)
        register_fake(_NS + "::all_reduce_residual_rmsnorm_fp8", _fused_ops.fake_fp8, lib=lib)
        for name, fn in _collective_ops.FAKES.items():
            register_fake(_NS + "::" + name, fn, lib=lib)
        fake_kind = register_fake.__name__
    else:
        # Old torch (1.13) has no autograd fallthrough for meta tensors
        # either: the ops are inference-only, so the meta kernel serves both.
        for key in ("Meta", "AutogradMeta"):
            lib.impl("all_reduce", _fake, key)
            lib.impl("all_reduce_", _fake_inplace, key)
            lib.impl("all_reduce_residual_rmsnorm", _fused_ops.fake, key)
            lib.impl("all_reduce_residual_rmsnorm_", _fused_ops.fake_inplace, key)
            lib.impl("all_reduce_residual_rmsnorm_fp8", _fused_ops.fake_fp8, key)
            for name, fn in _collective_ops.FAKES.items():
                lib.impl(name, fn, key)
        fake_kind = "Meta"
    return lib, fake_kind


# The Library object must live as long as the registrations.
LIBRARY, FAKE_REGISTRATION = _register()


def all_reduce(tensor, group_name):
    """torch.ops.quickreduce.all_reduce: a new tensor with the group's sum."""
    return torch.ops.quickreduce.all_reduce(tensor, group_name)


def all_reduce_(tensor, group_name):
    """torch.ops.quickreduce.all_reduce_: sums into `tensor`; returns it."""
    torch.ops.quickreduce.all_reduce_(tensor, group_name)
    return tensor


def all_reduce_residual_rmsnorm(tensor, residual, weight, eps, group_name):
    """torch.ops.quickreduce.all_reduce_residual_rmsnorm: (out, residual_out)."""
    return torch.ops.quickreduce.all_reduce_residual_rmsnorm(tensor, residual, weight, eps,
                                                              group_name)


def all_reduce_residual_rmsnorm_(tensor, residual, weight, eps, group_name):
    """torch.ops.quickreduce.all_reduce_residual_rmsnorm_: tensor <- out,
    residual <- residual_out; returns (tensor, residual)."""
    torch.ops.quickreduce.all_reduce_residual_rmsnorm_(tensor, residual, weight, eps, group_name)
    return tensor, residual


def all_reduce_residual_rmsnorm_fp8(tensor, residual, weight, scale, eps, group_name):
    """torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8: (quant, out,
    residual_out), quant = e4m3fn(out * (1 / scale)) (float8_e4m3fn, or uint8
    codes on torch without it)."""
    return torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8(tensor, residual, weight, scale,
                                                                  eps, group_name)


def reduce_scatter(tensor, world_size, group_name):
    """torch.ops.quickreduce.reduce_scatter: this rank's rows of the sum."""
    return torch.ops.quickreduce.reduce_scatter(tensor, world_size, group_name)


def all_gather(tensor, world_size, group_name):
    """torch.ops.quickreduce.all_gather: every rank's rows, in rank order."""
    return torch.ops.quickreduce.all_gather(tensor, world_size, group_name)
