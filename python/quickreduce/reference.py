"""The library's host reference of exactly the all-reduce a group runs, and
its error bound, for checking results bit for bit (qr_reference_all_reduce,
qr_reference_check_bound, qr_reference_error_bounds). The configuration is read from the environment
at each call, as a joining communicator reads it."""

import ctypes
import json

from . import _lib
from ._buffers import describe, empty_like
from ._enums import DType, Regime
from .errors import InvalidArgument

__all__ = ["version", "config", "reference_all_reduce", "check_bound", "error_bounds",
           "reference_all_reduce_residual_rmsnorm", "reference_all_reduce_residual_rmsnorm_fp8"]


def version():
    """The library's version string."""
    return _lib.lib().qr_version().decode()


def config():
    """The effective configuration of the environment now, as a dict (see
    qr_config_json in comm/quickreduce.h). Raises InvalidArgument for an
    invalid environment."""
    text = _lib.lib().qr_config_json(None)
    if text is None:
        _lib.check_status(1)
    return json.loads(text.decode())


def _prepare(inputs, regime, cast_bf16_to_fp16, dtype):
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise InvalidArgument("inputs must be a non-empty list with one array per rank")
    forced = DType.parse(dtype) if dtype is not None else None
    bufs = [describe(x, forced, "inputs[%d]" % i) for i, x in enumerate(inputs)]
    first = bufs[0]
    for i, b in enumerate(bufs):
        if b.dtype is None:
            raise InvalidArgument("inputs[%d] is not float16/bfloat16" % i)
        if b.device is not None:
            raise InvalidArgument("inputs[%d] is on cuda:%d; the reference takes host memory "
                                  "(use .cpu())" % (i, b.device))
        if not b.contiguous:
            raise InvalidArgument("inputs[%d] is not contiguous" % i)
        if b.dtype != first.dtype or b.nbytes != first.nbytes:
            raise InvalidArgument("inputs[%d] differs from inputs[0] in dtype or size" % i)
    if regime is None and cast_bf16_to_fp16 is None:
        r, cast = _lib.QR_REGIME_CONFIGURED, 0
    else:
        env = config()
        r = int(Regime.parse(regime) if regime is not None else Regime[env["regime"]])
        cast = int(bool(env["cast_bf16_to_fp16"] if cast_bf16_to_fp16 is None
                        else cast_bf16_to_fp16))
    ptrs = (ctypes.c_void_p * len(bufs))(*[b.ptr for b in bufs])
    return bufs, ptrs, r, cast, forced


def reference_all_reduce(inputs, regime=None, cast_bf16_to_fp16=None, *, out=None, dtype=None):
    """What a group of len(inputs) ranks computes for all_reduce(x, regime=...,
    cast_bf16_to_fp16=...) where rank r's x is inputs[r] (host arrays or CPU
    tensors): the same validation, one-shot or two-shot by the same policy,
    the same codec, the same bits. Returns `out` or a new array like inputs[0]."""
    bufs, ptrs, r, cast, forced = _prepare(inputs, regime, cast_bf16_to_fp16, dtype)
    if out is None:
        out = empty_like(bufs[0])
    obuf = describe(out, forced, "out")
    if obuf.nbytes != bufs[0].nbytes or obuf.device is not None or not obuf.contiguous:
        raise InvalidArgument("out must be a contiguous host buffer the size of the inputs")
    _lib.check_status(_lib.lib().qr_reference_all_reduce(
        ptrs, len(bufs), bufs[0].count, int(bufs[0].dtype), r, cast, obuf.ptr))
    return out


def check_bound(inputs, output, regime=None, cast_bf16_to_fp16=None, *, dtype=None):
    """Checks `output` of that call against the documented per-element error
    bound of the algorithm and codec it runs with. Returns (max_ratio,
    violations): the largest |error| / bound (<= 1 within the bound) and the
    number of elements above it."""
    bufs, ptrs, r, cast, forced = _prepare(inputs, regime, cast_bf16_to_fp16, dtype)
    obuf = describe(output, forced, "output")
    if obuf.nbytes != bufs[0].nbytes or obuf.device is not None or not obuf.contiguous:
        raise InvalidArgument("output must be a contiguous host buffer the size of the inputs")
    ratio = ctypes.c_double()
    violations = ctypes.c_size_t()
    _lib.check_status(_lib.lib().qr_reference_check_bound(
        ptrs, len(bufs), bufs[0].count, int(bufs[0].dtype), r, cast, obuf.ptr,
        ctypes.byref(ratio), ctypes.byref(violations)))
    return ratio.value, violations.value


def error_bounds(inputs, regime, cast_bf16_to_fp16=False, *, dtype=None):
    """The documented per-element bound on |output - exact sum| of the
    two-shot path with `regime`'s codec for these inputs (regime FP without
    the cast: also the one-shot path's), as a NumPy float64 array (a list of
    floats without NumPy). No policy applies: the regime names the codec.
    Elements of blocks that hold inf/NaN get NaN."""
    if regime is None:
        raise InvalidArgument("error_bounds needs a regime: FP, INT8, INT6, INT4 or INT3")
    bufs, ptrs, r, cast, _ = _prepare(inputs, regime, bool(cast_bf16_to_fp16), dtype)
    count = bufs[0].count
    out = (ctypes.c_double * count)()
    _lib.check_status(_lib.lib().qr_reference_error_bounds(
        ptrs, len(bufs), count, int(bufs[0].dtype), r, cast, out))
    try:
        import numpy as np
    except ImportError:
        return list(out)
    return np.ctypeslib.as_array(out).copy()


def reference_all_reduce_residual_rmsnorm(inputs, residual, weight, eps, regime=None,
                                          cast_bf16_to_fp16=None, *, dtype=None):
    """What a group of len(inputs) ranks computes for
    all_reduce_residual_rmsnorm(x, residual, weight, eps, regime=...) where
    rank r's x is inputs[r] and every rank's residual is `residual` (may be
    None): (out, residual_out) as new host arrays/tensors, the same bits."""
    from ._fused import reference
    _, _, r, cast, forced = _prepare(inputs, regime, cast_bf16_to_fp16, dtype)
    return reference(inputs, residual, weight, eps, r, cast, forced)


def reference_all_reduce_residual_rmsnorm_fp8(inputs, residual, weight, eps, scale, regime=None,
                                              cast_bf16_to_fp16=None, *, dtype=None):
    """What a group of len(inputs) ranks computes for
    all_reduce_residual_rmsnorm_fp8(x, residual, weight, eps, scale,
    regime=...) where rank r's x is inputs[r]: (quant_out, out, residual_out)
    as new host arrays/tensors, the same bits; quant_out holds the e4m3fn
    codes as uint8. `scale` is a number or one float32 in host memory."""
    from ._fused import reference_fp8
    _, _, r, cast, forced = _prepare(inputs, regime, cast_bf16_to_fp16, dtype)
    return reference_fp8(inputs, residual, weight, eps, scale, r, cast, forced)
