"""quickreduce: fast, optionally quantized all-reduce between independent
processes on one node, over libquickreduce.so (ctypes; no compiled extension).

    import quickreduce as qr
    with qr.Communicator("tp0", rank, world_size, device=None) as comm:  # None: host backend
        y = comm.all_reduce(x)              # out-of-place
        comm.all_reduce(x, out=x)           # in place
        comm.all_reduce(x, regime="INT4", cast_bf16_to_fp16=False)

With torch, `import quickreduce.ops` (done here when torch is already
imported) registers torch.ops.quickreduce.all_reduce / all_reduce_.
"""

import sys

from ._enums import DType, Regime
from .communicator import Communicator, fallback_for, lookup, register_fallback
from .errors import (AlreadyExists, Internal, InvalidArgument, PeerFailed, QuickReduceError,
                     Timeout, Unavailable, Unsupported)
from .reference import (check_bound, config, error_bounds, reference_all_reduce,
                        reference_all_reduce_residual_rmsnorm,
                        reference_all_reduce_residual_rmsnorm_fp8, version)

__version__ = "0.1.0"

__all__ = [
    "Communicator", "DType", "Regime", "QuickReduceError", "InvalidArgument", "Unavailable",
    "Timeout", "PeerFailed", "Unsupported", "AlreadyExists", "Internal", "version", "config",
    "reference_all_reduce", "check_bound", "error_bounds", "lookup", "register_fallback",
    "fallback_for", "reference_all_reduce_residual_rmsnorm",
    "reference_all_reduce_residual_rmsnorm_fp8",
]

if "torch" in sys.modules:
    from . import ops  # noqa: F401  (registers torch.ops.quickreduce.*)
