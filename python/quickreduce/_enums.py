"""Regime and DType, with the C ABI's values; strings are accepted by name."""

import enum

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
        from .errors import InvalidArgument
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                raise InvalidArgument("regime %r is not one of %s"
                                      % (value, ", ".join(m.name for m in cls))) from None
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
        from .errors import InvalidArgument
        if isinstance(value, cls):
            return value
        names = {"float16": cls.FLOAT16, "fp16": cls.FLOAT16, "half": cls.FLOAT16,
                 "bfloat16": cls.BFLOAT16, "bf16": cls.BFLOAT16}
        key = str(value).lower().replace("torch.", "")
        if key in names:
            return names[key]
        raise InvalidArgument("dtype %r is neither float16 nor bfloat16" % (value,))
