"""The quick-reduce settings of vLLM, SGLang and AITER, read with the meaning
each stack gives them and written as quickreduce's QR_* variables.

Each stack parses its variables its own way, and the values do not all mean
the same thing as ours: SGLang and AITER read MAX_SIZE_BYTES_MB=0 as "2 GB"
(ours: 1 .. 1048576, so a copied 0 failed the join), vLLM reads any cast
value other than true/1 as off (ours would read "yes" as on), AITER's 8-bit
codec is FP8. The table below holds every variable and value each stack
accepts, as read from:
  vLLM  vllm-project/vllm vllm/envs.py (VLLM_ROCM_QUICK_REDUCE_*, stored copy
        id 66428353334) and vllm/distributed/device_communicators/
        quick_all_reduce.py @02cdf876 (INT3; MIN_SIZE < 0 is an error there)
  SGLang sgl-project/sglang python/sglang/srt/distributed/device_communicators/
        quick_all_reduce.py @054be181 (ROCM_QUICK_REDUCE_*: int() parses, no INT3)
  AITER ROCm/aiter aiter/dist/device_communicators/quick_all_reduce.py
        @aca1a950 (AITER_QUICK_REDUCE_*: FP, FP8, INT6, INT4, INT3, NONE)
A QR_* variable that is set always wins. A value the stack itself would
refuse is an AliasError naming the variable, the value and what is accepted.
"""

import os

from ..errors import InvalidArgument

QUANTIZATION = "QR_QUANTIZATION"
CAST = "QR_CAST_BF16_TO_FP16"
MAX_MB = "QR_MAX_SIZE_BYTES_MB"
MIN_MB = "QR_MIN_SIZE_BYTES_MB"
QUANT_MIN_KB = "QR_QUANTIZATION_MIN_SIZE_KB"

UNSET = object()  # a translation meaning "leave ours unset": our default is the stack's


class AliasError(InvalidArgument):
    """A stack's quick-reduce variable holds a value that stack does not accept."""


def _fail(name, value, accepted):
    raise AliasError("%s=%r is not a value its stack accepts (%s); quickreduce is not installed"
                     % (name, value, accepted))


def _choice(choices, renames=None, upper=False):
    def parse(name, value):
        v = value.strip().upper() if upper else value
        if v not in choices:
            _fail(name, value, "one of " + ", ".join(choices))
        return (renames or {}).get(v, v)
    return parse


def _int(name, value, accepted):
    try:
        return int(value)
    except ValueError:
        _fail(name, value, accepted)


def _vllm_cast(name, value):
    # vllm/envs.py: os.getenv(...).lower() in ("true", "1"); anything else is off.
    return "1" if value.lower() in ("true", "1") else "0"


def _int_cast(name, value):
    # SGLang and AITER: int(os.environ.get(..., 1)), non-zero is on.
    return "1" if _int(name, value, "an integer; 0 is off") != 0 else "0"


def _vllm_max(name, value):
    # vLLM multiplies by MB and admits nothing above it: below 1 it takes no
    # message at all, which quickreduce's range (1 ..) refuses.
    mb = _int(name, value, "an integer >= 1 (MiB)")
    if mb < 1:
        _fail(name, value, "an integer >= 1 (MiB); below 1 vLLM's quick reduce takes no message")
    return str(mb)


def _zero_is_default_max(name, value):
    # SGLang and AITER: "if qr_max_size > 0 ... else 2 GB (ops.qr_max_size())".
    mb = _int(name, value, "an integer >= 0 (MiB); 0 = 2 GB")
    if mb < 0:
        _fail(name, value, "an integer >= 0 (MiB); 0 = 2 GB")
    return UNSET if mb == 0 else str(mb)


def _non_negative(unit):
    def parse(name, value):
        n = _int(name, value, "an integer >= 0 (%s)" % unit)
        if n < 0:
            _fail(name, value, "an integer >= 0 (%s)" % unit)
        return str(n)
    return parse


# (stack, variable, our variable, parse(name, value) -> our value or UNSET)
TABLE = [
    ("vllm", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", QUANTIZATION,
     _choice(("FP", "INT8", "INT6", "INT4", "INT3", "NONE"))),
    ("vllm", "VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16", CAST, _vllm_cast),
    ("vllm", "VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB", MAX_MB, _vllm_max),
    ("vllm", "VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB", MIN_MB, _non_negative("MiB")),
    ("vllm", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION_MIN_SIZE_KB", QUANT_MIN_KB,
     _non_negative("KiB")),
    ("sglang", "ROCM_QUICK_REDUCE_QUANTIZATION", QUANTIZATION,
     _choice(("FP", "INT8", "INT6", "INT4", "NONE"))),
    ("sglang", "ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16", CAST, _int_cast),
    ("sglang", "ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB", MAX_MB, _zero_is_default_max),
    # AITER's 8-bit codec is FP8; ours is INT8 (block-scaled integers, the
    # same wire size and a tighter error bound: docs/codecs.md).
    ("aiter", "AITER_QUICK_REDUCE_QUANTIZATION", QUANTIZATION,
     _choice(("FP", "FP8", "INT6", "INT4", "INT3", "NONE"), renames={"FP8": "INT8"})),
    ("aiter", "AITER_QUICK_REDUCE_CAST_BF16_TO_FP16", CAST, _int_cast),
    ("aiter", "AITER_QUICK_REDUCE_MAX_SIZE_BYTES_MB", MAX_MB, _zero_is_default_max),
]

# Which stacks' names an adapter honours, first wins: its own, then AITER's
# (ATOM and other AITER-based plugins run inside both).
SOURCES = {"vllm": ("vllm", "aiter"), "sglang": ("sglang", "aiter")}


def resolve(stack, environ=None):
    """{our variable: (value or UNSET, the alias it came from)} for the
    aliases of `stack` that are set and whose QR_* variable is not. Raises
    AliasError for a value the stack does not accept."""
    env = os.environ if environ is None else environ
    out = {}
    for source in SOURCES[stack]:
        for s, name, ours, parse in TABLE:
            if s != source or name not in env or ours in env or ours in out:
                continue
            out[ours] = (parse(name, env[name]), name)
    return out


def apply(stack, environ=None, log=None):
    """Writes resolve(stack)'s values into the environment (the library reads
    QR_* at join). For an UNSET result nothing is written: the library's
    default is what the stack meant. Returns the mapping."""
    env = os.environ if environ is None else environ
    out = resolve(stack, env)
    for ours, (value, name) in sorted(out.items()):
        if value is UNSET:
            if log:
                log("%s=%s: quickreduce keeps its default for %s", name, env[name], ours)
            continue
        env[ours] = value
        if log and value != env[name]:
            log("%s=%s read as %s=%s", name, env[name], ours, value)
    return out
