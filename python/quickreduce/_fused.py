"""The argument handling of Communicator.all_reduce_residual_rmsnorm and
reference_all_reduce_residual_rmsnorm (docs/fused.md): shapes, dtypes and
devices are checked here; pointer overlaps and alignment by the library."""

import ctypes

from . import _lib
from ._buffers import describe, empty_like
from .errors import InvalidArgument


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


def run_residual_rmsnorm(lib, c, device, x, residual, weight, eps, out, residual_out, regime,
                         cast, stream, forced=None):
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
    st = lib.qr_all_reduce_residual_rmsnorm(c, xb.ptr, rptr, wb.ptr, rob.ptr, ob.ptr,
                                            xb.count // hidden, hidden, float(eps),
                                            int(xb.dtype), regime, cast, stream)
    if st:
        _lib.check_status(st)
    return out, residual_out


def reference(inputs, residual, weight, eps, regime, cast, forced):
    """qr_reference_all_reduce_residual_rmsnorm over host buffers; returns
    (norm_out, residual_out) like inputs[0]."""
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
    norm_out, residual_out = empty_like(first), empty_like(first)
    ptrs = (ctypes.c_void_p * len(bufs))(*[b.ptr for b in bufs])
    _lib.check_status(_lib.lib().qr_reference_all_reduce_residual_rmsnorm(
        ptrs, len(bufs), rptr, wb.ptr, first.count // hidden, hidden, float(eps),
        int(first.dtype), regime, cast, describe(residual_out, forced).ptr,
        describe(norm_out, forced).ptr))
    return norm_out, residual_out
