"""Regime and DType, with the C ABI's values; strings are accepted by name."""

import enum

from .errors import InvalidArgument

__all__ = ["Regime", "DType"]


class Regime(enum.IntEnum):
    """qr_regime: the wire codec of a call, or NONE (quickreduce declines)."""
    FP = 0
    INT8 = 1
    INT6 = 2
    INT4 = 3
    INT3 = 4  # world size 2 only
    NONE = 5

    @classmethod
    def parse(cls, value):
        """A Regime from a Regime, its name (any case) or its value."""
        if type(value) is cls:
            return value
        if isinstance(value, str):
            r = _REGIME_NAMES.get(value) or _REGIME_NAMES.get(value.strip().upper())
            if r is None:
                raise InvalidArgument("regime %r is not one of %s"
                                      % (value, ", ".join(m.name for m in cls)))
            return r
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                raise InvalidArgument("regime %r is not a qr_regime (0..5)" % value) from None
        raise InvalidArgument("regime must be a Regime, a name or an int, not %r" % (value,))


class DType(enum.IntEnum):
    """qr_dtype: the element type of a call."""
    FLOAT16 = 0
    BFLOAT16 = 1

    @classmethod
    def parse(cls, value):
        """A DType from a DType or a name ("float16", "bf16", "torch.bfloat16", ...)."""
        if type(value) is cls:
            return value
        d = _DTYPE_NAMES.get(value) if isinstance(value, str) else None
        if d is None:
            d = _DTYPE_NAMES.get(str(value).lower().replace("torch.", ""))
        if d is None:
            raise InvalidArgument("dtype %r is neither float16 nor bfloat16" % (value,))
        return d


_REGIME_NAMES = {r.name: r for r in Regime}
_DTYPE_NAMES = {"float16": DType.FLOAT16, "fp16": DType.FLOAT16, "half": DType.FLOAT16,
                "bfloat16": DType.BFLOAT16, "bf16": DType.BFLOAT16}
