"""SGLang adapter: installs quickreduce into GroupCoordinator's `qr_comm`
slot (the "qr" all-reduce method), on NVIDIA too. Opt-in: QR_SGLANG=1.

SGLang has no plugin entry point and spawns its workers, so the wheel ships
a .pth file that, when QR_SGLANG=1, arms an import hook in every interpreter:
the moment sglang.srt.distributed.parallel_state is imported, patch() runs.
Calling patch() by hand after importing SGLang does the same.

SGLang's own variables (ROCM_QUICK_REDUCE_QUANTIZATION, ..._CAST_BF16_TO_FP16,
..._MAX_SIZE_BYTES_MB) become QR_* defaults when the QR_* ones are unset;
regimes are matched by name (SGLang's enum numbers them differently).
On CUDA, SGLang asks its custom all-reduce before "qr"; QR_SGLANG_FIRST=1 makes
custom all-reduce decline what quickreduce takes.

Written against SGLang's parallel_state.py and quick_all_reduce.py as read for
docs/python.md (the port of PR #6619); guarded like the vLLM plugin.
"""

import importlib.abc
import importlib.util
import logging
import os
import sys

from ._backend import WORLD_SIZES, QuickReduceBackend, wrap_init

logger = logging.getLogger("quickreduce")

MODULE = "sglang.srt.distributed.parallel_state"
_ENV_ALIASES = {
    "ROCM_QUICK_REDUCE_QUANTIZATION": "QR_QUANTIZATION",
    "ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16": "QR_CAST_BF16_TO_FP16",
    "ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB": "QR_MAX_SIZE_BYTES_MB",
}


def enabled():
    return os.environ.get("QR_SGLANG") == "1"


def _apply_env_aliases():
    for theirs, ours in _ENV_ALIASES.items():
        if theirs in os.environ and ours not in os.environ:
            os.environ[ours] = os.environ[theirs]


def install(group_coordinator_class):
    """Wraps group_coordinator_class.__init__ (idempotent)."""
    first = os.environ.get("QR_SGLANG_FIRST") == "1"

    def after(self):
        name = str(getattr(self, "unique_name", ""))
        if not name.startswith("tp") or getattr(self, "world_size", None) not in WORLD_SIZES:
            return
        current = getattr(self, "qr_comm", None)
        if current is not None and not getattr(current, "disabled", True):
            return  # SGLang's own quick reduce is active (ROCm)
        backend = QuickReduceBackend(self.cpu_group, self.device,
                                     label="sglang-" + name.replace(":", "-"))
        if backend.disabled:
            return
        self.qr_comm = backend
        ca = getattr(self, "ca_comm", None)
        if first and ca is not None and hasattr(ca, "should_custom_ar"):
            native = ca.should_custom_ar
            ca.should_custom_ar = lambda t: not backend.should_quick_allreduce(t) and native(t)

    wrap_init(group_coordinator_class, after)


def patch(module=None):
    """Installs into SGLang's GroupCoordinator (imports it unless given)."""
    _apply_env_aliases()
    try:
        if module is None:
            module = importlib.import_module(MODULE)
        install(module.GroupCoordinator)
    except Exception as e:
        logger.warning("quickreduce: SGLang's GroupCoordinator not found (%s); not patched", e)


class _Hook(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs patch() right after MODULE is first executed."""

    def find_spec(self, fullname, path, target=None):
        if fullname != MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self._inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        patch(module)


def arm():
    """Patches SGLang now if it is imported, else as soon as it is (QR_SGLANG=1 only)."""
    if not enabled():
        return
    if MODULE in sys.modules:
        patch(sys.modules[MODULE])
    elif not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
