"""Deterministic test inputs as 16-bit NumPy arrays (float16, or bfloat16 bits
in uint16), the same in every rank process and in the checking process."""

import numpy as np


def to_bf16_bits(f32):
    """float32 -> bfloat16 bits, round half to even."""
    b = np.ascontiguousarray(f32, dtype=np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def make_input(dtype, nbytes, rank, seed, pattern="random"):
    """rank's input of nbytes bytes. dtype "fp16" gives float16, "bf16" uint16
    bfloat16 bits. Patterns: random (normal, scale varying per block, a few
    large outliers) and special (inf, NaN, the extremes, subnormals, zeros,
    a huge value among tiny ones)."""
    n = nbytes // 2
    rng = np.random.default_rng([seed, rank, n])
    x = rng.standard_normal(n).astype(np.float32)
    x *= np.repeat(rng.uniform(0.01, 8.0, (n + 31) // 32).astype(np.float32), 32)[:n]
    hot = rng.integers(0, n, max(1, n // 1000))
    x[hot] *= 200.0
    if pattern == "special":
        # bf16: 8 ranks of it still sum below fp32's range (where the bound holds).
        big = 65504.0 if dtype == "fp16" else 4.0e37
        tiny = 6e-8 if dtype == "fp16" else 1e-39
        specials = np.array([np.inf, -np.inf, np.nan, big, -big, tiny, -tiny, 0.0, -0.0,
                             1e4, 1e-4], dtype=np.float32)
        idx = rng.integers(0, n, max(8, n // 16))
        x[idx] = specials[rng.integers(0, len(specials), len(idx))]
        x[:32] = tiny
        x[5] = big / 4
    if dtype == "fp16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16)
    return to_bf16_bits(x)
