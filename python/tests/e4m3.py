"""An e4m3fn encoder for the tests, written apart from the library's
(kernels/float8.h, integer arithmetic on fp32 bits) and the torch fallback's
(quickreduce._fused_ops.e4m3_codes, frexp): every value goes to the nearest of
the format's finite codes, read off a table of all 256 codes, ties to the
even code; beyond the largest (448, infinities included) saturates; NaN is
0x7F. And the quantization the fused FP8 call specifies on top of it:
quant = e4m3fn(float32(norm) * (float32(1) / float32(scale)))."""

import numpy as np


def decode(code):
    """The value of an e4m3fn code (a Python float; NaN for 0x7F / 0xFF)."""
    sign = -1.0 if code & 0x80 else 1.0
    field, mant = (code >> 3) & 0xF, code & 0x7
    if field == 0xF and mant == 0x7:
        return float("nan")
    if field == 0:
        return sign * mant * 2.0 ** -9
    return sign * (1 + mant / 8.0) * 2.0 ** (field - 7)


# The non-negative finite codes 0x00 .. 0x7E, in increasing order of value.
_CODES = np.arange(0x7F)
_VALUES = np.array([decode(int(c)) for c in _CODES])
assert np.all(np.diff(_VALUES) > 0)


def encode(values):
    """The e4m3fn codes (uint8) of an array of floats (module docstring)."""
    v = np.asarray(values, dtype=np.float64)
    a = np.minimum(np.abs(v), _VALUES[-1])
    hi = np.clip(np.searchsorted(_VALUES, a, side="left"), 0, len(_VALUES) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - _VALUES[lo], _VALUES[hi] - a
    # All of these are exact in float64: the codes' values and float32 inputs
    # have few significant bits, so a tie is a tie.
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (_CODES[hi] % 2 == 0))
    code = np.where(take_hi, _CODES[hi], _CODES[lo])
    code = np.where(np.signbit(v), code | 0x80, code)
    code = np.where(np.isnan(v), 0x7F, code)
    return code.astype(np.uint8)


def as_float32(bits16, dtype):
    """float16 values, or bfloat16 bits (uint16), as float32."""
    if dtype == "fp16":
        return np.asarray(bits16).view(np.float16).astype(np.float32)
    return (np.asarray(bits16).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def quantize(norm_f32, scale):
    """The fused call's quant_out from the norm (float32 values): the product
    with the fp32 reciprocal of the scale, each rounded once to fp32."""
    inv = np.float32(1) / np.float32(scale)
    with np.errstate(over="ignore", invalid="ignore"):
        return encode(np.asarray(norm_f32, dtype=np.float32) * inv)
