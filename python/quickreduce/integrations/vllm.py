"""vLLM general plugin: installs quickreduce as vLLM's quick all-reduce
communicator (the `qr_comm` slot of CudaCommunicator), on NVIDIA too, where
vLLM itself builds it only on ROCm.

Entry point (the wheel declares it): vllm.general_plugins: quickreduce =
quickreduce.integrations.vllm:register. vLLM calls register() in every process
it starts. It is opt-in: it acts only when QR_VLLM=1 or a quantization regime
is chosen (QR_QUANTIZATION or vLLM's VLLM_ROCM_QUICK_REDUCE_QUANTIZATION, not
NONE). The library reads the VLLM_ROCM_QUICK_REDUCE_* variables as aliases of
its QR_* ones (QR_* wins), so vLLM's settings keep their meaning.

For tensor-parallel groups (unique_name "tp:...") of 2, 4 or 8 ranks, after
vLLM's own CudaCommunicator.__init__, the slot gets a QuickReduceBackend built
from the group's CPU group and device, replacing vLLM's ROCm QuickAllReduce
unless QR_VLLM_KEEP_NATIVE=1. vLLM's CudaCommunicator.all_reduce then asks it
first (after NCCL symmetric memory where that is enabled) inside
torch.ops.vllm.all_reduce, so the choice is made at run time under
torch.compile and CUDA graphs.

Written against vLLM's cuda_communicator.py as of commit 089eca13 (mid-2025)
and the newest quick_all_reduce.py read for docs/python.md; guarded so that a
vLLM without these names gets a warning, not an error.
"""

import logging
import os

from ._backend import WORLD_SIZES, QuickReduceBackend, wrap_init

logger = logging.getLogger("quickreduce")

_MODULE = "vllm.distributed.device_communicators.cuda_communicator"
_installed = False


def enabled():
    if os.environ.get("QR_VLLM") == "1":
        return True
    regime = os.environ.get("QR_QUANTIZATION") or \
        os.environ.get("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION")
    return bool(regime) and regime.strip().upper() != "NONE"


def _is_tp(unique_name):
    return str(unique_name).split(":")[0] == "tp"


def install(cuda_communicator_class):
    """Wraps cuda_communicator_class.__init__ (idempotent)."""
    keep_native = os.environ.get("QR_VLLM_KEEP_NATIVE") == "1"

    def after(self):
        name = getattr(self, "unique_name", "")
        if not _is_tp(name) or getattr(self, "world_size", None) not in WORLD_SIZES:
            return
        native = getattr(self, "qr_comm", None)
        if native is not None and not getattr(native, "disabled", True) and keep_native:
            return
        backend = QuickReduceBackend(self.cpu_group, self.device,
                                     label="vllm-" + name.replace(":", "-"))
        if backend.disabled:
            return
        if native is not None and hasattr(native, "close"):
            native.close()
        self.qr_comm = backend

    wrap_init(cuda_communicator_class, after)


def register():
    """The vllm.general_plugins entry point."""
    global _installed
    if _installed or not enabled():
        return
    try:
        import importlib
        mod = importlib.import_module(_MODULE)
        cls = getattr(mod, "CudaCommunicator")
    except Exception as e:
        logger.warning("quickreduce: vLLM's CudaCommunicator not found (%s); plugin inactive", e)
        return
    install(cls)
    _installed = True
