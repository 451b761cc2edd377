"""Reduce-scatter and all-gather for Communicator (qr_reduce_scatter_ex,
qr_all_gather_ex; docs/collectives.md). Kept apart from communicator.py, which
binds them as methods."""

import sys

from . import _lib
from ._buffers import ALIGNMENT, describe
from ._enums import DType
from .errors import InvalidArgument


def _new(buf, shape):
    """A new, 16-byte aligned, contiguous array/tensor of `shape` like buf."""
    if buf.kind == "numpy":
        np = sys.modules["numpy"]
        nbytes = 2
        for d in shape:
            nbytes *= d
        raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
        off = (-raw.ctypes.data) % ALIGNMENT
        return raw[off:off + nbytes].view(buf.obj.dtype).reshape(shape)
    torch = sys.modules["torch"]
    return torch.empty(shape, dtype=buf.obj.dtype, device=buf.obj.device)


def _shape(obj):
    return tuple(obj.shape)


def _checked(comm, x, forced, what):
    buf = describe(x, forced, what)
    why = buf.problem(comm.device, what)
    if why:
        raise InvalidArgument(why)
    return buf


def _run(comm, name, fn, x, out, regime, cast_bf16_to_fp16, dtype, per_rank_in):
    """One call: per_rank_in is True for all-gather (x is this rank's values)."""
    c = comm._handle(name)
    ws = comm.world_size
    forced = DType.parse(dtype) if dtype is not None else None
    buf = _checked(comm, x, forced, "input")
    if per_rank_in:
        count = buf.count
        want = count * ws
    else:
        if buf.count % ws:
            raise InvalidArgument("%s: the input's %d values do not split into %d shards"
                                  % (name, buf.count, ws))
        count = buf.count // ws
        want = count
    if out is None:
        shape = _shape(x)
        if per_rank_in:
            shape = (shape[0] * ws,) + shape[1:] if shape else (ws,)
        elif shape and shape[0] % ws == 0:
            shape = (shape[0] // ws,) + shape[1:]
        else:
            shape = (count,)
        out = _new(buf, shape)
    obuf = _checked(comm, out, forced, "out")
    if obuf.dtype != buf.dtype or obuf.count != want:
        raise InvalidArgument("%s: out (%d values of %s) must hold %d values of %s"
                              % (name, obuf.count, obuf.dtype.name, want, buf.dtype.name))
    r, cast = comm._regime_cast(regime, cast_bf16_to_fp16)
    stream = None
    if comm.device is not None:
        from .communicator import _cuda_stream
        stream = _cuda_stream(comm.device)
    st = fn(c, buf.ptr, obuf.ptr, count, buf.dtype, r, cast, stream)
    if st:
        _lib.check_status(st)
    return out


def reduce_scatter(comm, x, out=None, *, regime=None, cast_bf16_to_fp16=None, dtype=None):
    return _run(comm, "reduce_scatter", comm._lib.qr_reduce_scatter_ex, x, out, regime,
                cast_bf16_to_fp16, dtype, per_rank_in=False)


def all_gather(comm, x, out=None, *, regime=None, cast_bf16_to_fp16=None, dtype=None):
    return _run(comm, "all_gather", comm._lib.qr_all_gather_ex, x, out, regime,
                cast_bf16_to_fp16, dtype, per_rank_in=True)


def should_run(comm, x, per_rank_in, *, regime=None, cast_bf16_to_fp16=None):
    """Whether reduce_scatter (per_rank_in False) / all_gather (True) of x
    would run quickreduce: x suits this communicator, its shard is whole
    16-byte units and the all-reduce's rule holds for the whole message."""
    if comm.closed:
        return False
    try:
        buf = describe(x)
    except InvalidArgument:
        return False
    ws = comm.world_size
    if buf.dtype is None or buf.device != comm.device or not buf.contiguous or \
            buf.ptr % ALIGNMENT:
        return False
    shard = buf.nbytes if per_rank_in else buf.nbytes // ws
    if (not per_rank_in and buf.nbytes % ws) or shard % ALIGNMENT or shard == 0:
        return False
    r, cast = comm._regime_cast(regime, cast_bf16_to_fp16)
    return comm._lib.qr_should_all_reduce_ex(comm._c, shard * ws, int(buf.dtype), int(r),
                                             int(cast)) == 1
