"""The argument handling of Communicator.all_reduce_residual_rmsnorm(_fp8) and
reference_all_reduce_residual_rmsnorm(_fp8) (docs/fused.md): shapes, dtypes
and devices are checked here; pointer overlaps and alignment by the library."""

import ctypes
import numbers
import sys

from . import _lib
from ._buffers import ALIGNMENT, _where, describe, empty_like
from .errors import InvalidArgument

# The element types a quant_out may have: one byte each, holding e4m3fn codes
# (float8_e4m3fn itself, or its bits as uint8 / int8). Other 1-byte types
# (e5m2, e4m3fnuz, bool) would read the codes as something else.
QUANT_DTYPES = ("float8_e4m3fn", "uint8", "int8")


def _hidden_of(weight_buf, x_buf):
    hidden = weight_buf.count
    if hidden == 0 or x_buf.count % hidden:
        raise InvalidArgument("weight has %d values; the input's %d values are not rows of them"
                              % (hidden, x_buf.count))
    return hidden


def _same(buf, like, device, what):
    why = buf.problem(device, what)
    if why:
        raise InvalidArgument(why)
    if buf.dtype != like.dtype or buf.nbytes != like.nbytes:
        raise InvalidArgument("%s (%d bytes of %s) does not match the input (%d bytes of %s)"
                              % (what, buf.nbytes, buf.dtype.name, like.nbytes, like.dtype.name))


def _output(obj, like, device, what, forced):
    if obj is None:
        obj = empty_like(like)
    buf = describe(obj, forced, what)
    _same(buf, like, device, what)
    return obj, buf


def _dtype_name(buf):
    return str(buf.obj.dtype).replace("torch.", "")


def quant_dtype():
    """What a new quant_out of torch tensors is: float8_e4m3fn where this
    torch has it (2.1 and newer), else uint8 holding the same codes."""
    torch = sys.modules["torch"]
    return getattr(torch, "float8_e4m3fn", torch.uint8)


def _empty_codes(like, fp8):
    """A new uninitialised 16-byte aligned buffer of one byte per value of
    `like`, in its shape, kind and device: for torch float8_e4m3fn when `fp8`
    and this torch has it, else uint8."""
    if like.kind == "numpy":
        np = sys.modules["numpy"]
        raw = np.empty(like.count + ALIGNMENT, dtype=np.uint8)
        off = (-raw.ctypes.data) % ALIGNMENT
        return raw[off:off + like.count].reshape(like.obj.shape)
    torch = sys.modules["torch"]
    return torch.empty(like.obj.shape, dtype=quant_dtype() if fp8 else torch.uint8,
                       device=like.obj.device)


def _quant_output(obj, like, device):
    if obj is None:
        obj = _empty_codes(like, fp8=True)
    buf = describe(obj, None, "quant_out")
    name = _dtype_name(buf)
    if name not in QUANT_DTYPES:
        raise InvalidArgument("quant_out has dtype %s; it takes e4m3fn codes: %s"
                              % (name, ", ".join(QUANT_DTYPES)))
    if buf.device != device:
        raise InvalidArgument("quant_out is on %s but the communicator is on %s"
                              % (_where(buf.device), _where(device)))
    if not buf.contiguous:
        raise InvalidArgument("quant_out is not contiguous")
    if buf.nbytes != like.count:
        raise InvalidArgument("quant_out holds %d values; the input %d"
                              % (buf.nbytes, like.count))
    return obj, buf


def _scale_ptr(scale, device):
    """The address of the one float32 of `scale` (an array or tensor in the
    backend's memory: the kernel reads it when it runs)."""
    if scale is None:
        raise InvalidArgument("scale is missing: one float32 value (an array or tensor) by "
                              "which the norm is divided before it is quantized")
    buf = describe(scale, None, "scale")
    name = _dtype_name(buf)
    if name != "float32" or buf.nbytes != 4:
        raise InvalidArgument("scale must hold one float32 value, not %d bytes of %s"
                              % (buf.nbytes, name))
    if buf.device != device:
        raise InvalidArgument("scale is on %s but the call runs on %s"
                              % (_where(buf.device), _where(device)))
    return buf.ptr


def _arguments(device, x, residual, weight, out, residual_out, forced):
    """The checked arguments both calls share: (input, weight, hidden, the
    residual's address or None, out and its Buffer, residual_out and its
    Buffer), the outputs new ones where None."""
    xb = describe(x, forced, "input")
    why = xb.problem(device, "input")
    if why:
        raise InvalidArgument(why)
    wb = describe(weight, forced, "weight")
    why = wb.problem(device, "weight")
    if why:
        raise InvalidArgument(why)
    if wb.dtype != xb.dtype:
        raise InvalidArgument("weight is %s, the input %s" % (wb.dtype.name, xb.dtype.name))
    hidden = _hidden_of(wb, xb)
    rptr = None
    if residual is not None:
        rb = describe(residual, forced, "residual")
        _same(rb, xb, device, "residual")
        rptr = rb.ptr
    out, ob = _output(out, xb, device, "out", forced)
    residual_out, rob = _output(residual_out, xb, device, "residual_out", forced)
    return xb, wb, hidden, rptr, out, ob, residual_out, rob


def run_residual_rmsnorm(lib, c, device, x, residual, weight, eps, out, residual_out, regime,
                         cast, stream, forced=None):
    xb, wb, hidden, rptr, out, ob, residual_out, rob = _arguments(
        device, x, residual, weight, out, residual_out, forced)
    st = lib.qr_all_reduce_residual_rmsnorm(c, xb.ptr, rptr, wb.ptr, rob.ptr, ob.ptr,
                                            xb.count // hidden, hidden, float(eps),
                                            int(xb.dtype), regime, cast, stream)
    if st:
        _lib.check_status(st)
    return out, residual_out


def run_residual_rmsnorm_fp8(lib, c, device, x, residual, weight, eps, scale, out,
                             residual_out, quant_out, regime, cast, stream, forced=None):
    """run_residual_rmsnorm, and quant_out = e4m3fn(out * (1 / scale)) (a new
    buffer of the input's shape unless given); returns (quant_out, out,
    residual_out)."""
    sptr = _scale_ptr(scale, device)
    xb, wb, hidden, rptr, out, ob, residual_out, rob = _arguments(
        device, x, residual, weight, out, residual_out, forced)
    quant_out, qb = _quant_output(quant_out, xb, device)
    st = lib.qr_all_reduce_residual_rmsnorm_fp8(c, xb.ptr, rptr, wb.ptr, rob.ptr, ob.ptr,
                                                qb.ptr, sptr, xb.count // hidden, hidden,
                                                float(eps), int(xb.dtype), regime, cast, stream)
    if st:
        _lib.check_status(st)
    return quant_out, out, residual_out


def _reference_arguments(inputs, residual, weight, forced):
    bufs = [describe(v, forced, "inputs[%d]" % i) for i, v in enumerate(inputs)]
    first = bufs[0]
    for i, b in enumerate(bufs):
        if b.device is not None or not b.contiguous or b.dtype != first.dtype or \
                b.nbytes != first.nbytes:
            raise InvalidArgument("inputs[%d] must be a contiguous host buffer like inputs[0]"
                                  % i)
    wb = describe(weight, forced, "weight")
    if wb.dtype != first.dtype:
        raise InvalidArgument("weight is not the inputs' dtype")
    hidden = _hidden_of(wb, first)
    rptr = None
    if residual is not None:
        rb = describe(residual, forced, "residual")
        if rb.nbytes != first.nbytes or rb.device is not None or rb.dtype != first.dtype:
            raise InvalidArgument("residual must be a host buffer the size of the inputs")
        rptr = rb.ptr
    ptrs = (ctypes.c_void_p * len(bufs))(*[b.ptr for b in bufs])
    return bufs, first, wb, hidden, rptr, ptrs


def reference(inputs, residual, weight, eps, regime, cast, forced):
    """qr_reference_all_reduce_residual_rmsnorm over host buffers; returns
    (norm_out, residual_out) like inputs[0]."""
    bufs, first, wb, hidden, rptr, ptrs = _reference_arguments(inputs, residual, weight, forced)
    norm_out, residual_out = empty_like(first), empty_like(first)
    _lib.check_status(_lib.lib().qr_reference_all_reduce_residual_rmsnorm(
        ptrs, len(bufs), rptr, wb.ptr, first.count // hidden, hidden, float(eps),
        int(first.dtype), regime, cast, describe(residual_out, forced).ptr,
        describe(norm_out, forced).ptr))
    return norm_out, residual_out


def reference_fp8(inputs, residual, weight, eps, scale, regime, cast, forced):
    """qr_reference_all_reduce_residual_rmsnorm_fp8 over host buffers; `scale`
    a number or one host float32. Returns (quant_out as uint8 codes, norm_out,
    residual_out) like inputs[0]."""
    if isinstance(scale, numbers.Real) and not isinstance(scale, bool):
        box = ctypes.c_float(scale)
        sptr = ctypes.addressof(box)
    else:
        sptr = _scale_ptr(scale, None)
    bufs, first, wb, hidden, rptr, ptrs = _reference_arguments(inputs, residual, weight, forced)
    norm_out, residual_out = empty_like(first), empty_like(first)
    quant_out = _empty_codes(first, fp8=False)
    _lib.check_status(_lib.lib().qr_reference_all_reduce_residual_rmsnorm_fp8(
        ptrs, len(bufs), rptr, wb.ptr, first.count // hidden, hidden, float(eps), sptr,
        int(first.dtype), regime, cast, describe(residual_out, forced).ptr,
        describe(norm_out, forced).ptr, describe(quant_out, None).ptr))
    return quant_out, norm_out, residual_out
