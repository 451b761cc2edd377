"""One policy for both adapters: when quickreduce installs itself into a
stack, what the stack's own switches mean to it, and what it tells the user.

- Opt-in. Installing the wheel changes nothing: an adapter acts only when
  QR_VLLM=1 / QR_SGLANG=1, or when the stack's plugin allowlist
  (VLLM_PLUGINS / SGLANG_PLUGINS) names `quickreduce`. The stack's own
  quick-reduce variables (VLLM_ROCM_QUICK_REDUCE_QUANTIZATION, ...) configure
  quickreduce once it is on, never turn it on. QR_VLLM=0 / QR_SGLANG=0 is off
  whatever the allowlist says.
- Off switches. vLLM's --disable-custom-all-reduce and SGLang's
  use_custom_allreduce=False (which gate their own quick reduce) keep
  quickreduce out too, unless QR_VLLM=1 / QR_SGLANG=1, which is logged.
- Native quick reduce (ROCm). Once opted in, quickreduce takes the stack's
  qr_comm slot; QR_VLLM_KEEP_NATIVE=1 / QR_SGLANG_KEEP_NATIVE=1 keep the
  stack's own where it is active.
- Batch invariance (VLLM_BATCH_INVARIANT=1, SGLANG_ENABLE_DETERMINISTIC_INFERENCE):
  the backend runs FP only and takes every size it can hold (_backend.py).
- Bypasses. A path of the stack's configuration that carries tensor-parallel
  all-reduces around the qr_comm slot is named once in a warning through the
  stack's logger (bypass_warning); work that later serves a path calls
  serve_path() so the warning stops naming it.
"""

import os

from .. import stack_info

STACKS = {
    # stack: (our switch, keep-native switch, the stack's plugin allowlist)
    "vllm": ("QR_VLLM", "QR_VLLM_KEEP_NATIVE", "VLLM_PLUGINS"),
    "sglang": ("QR_SGLANG", "QR_SGLANG_KEEP_NATIVE", "SGLANG_PLUGINS"),
}
PLUGIN_NAME = stack_info.PLUGIN_NAME


def _env(environ):
    return os.environ if environ is None else environ


def explicit(stack, environ=None):
    """True for QR_<STACK>=1, False for any other set value, None when unset."""
    v = _env(environ).get(STACKS[stack][0])
    return None if v is None else v == "1"


def allowlisted(stack, environ=None):
    """The stack's allowlist names quickreduce (vLLM: VLLM_PLUGINS split on
    ","; SGLang: SGLANG_PLUGINS, stripped names; both as in their plugin
    loaders)."""
    v = _env(environ).get(STACKS[stack][2])
    return v is not None and PLUGIN_NAME in {x.strip() for x in v.split(",")}


def enabled(stack, environ=None):
    """The opt-in: QR_<STACK>=1, or the allowlist names quickreduce and
    QR_<STACK> is not set to something else."""
    e = explicit(stack, environ)
    return e if e is not None else allowlisted(stack, environ)


def keep_native(stack, environ=None):
    return _env(environ).get(STACKS[stack][1]) == "1"


def admit(stack, stack_switch_off, switch_name, log, environ=None):
    """Whether to install into one group, given the stack's own switch for
    custom all-reduce (off: the user turned it off). Logs the override."""
    if not stack_switch_off:
        return True
    if explicit(stack, environ):
        log("%s=1 overrides %s: quickreduce is installed although the stack's custom all-reduce "
            "is off", STACKS[stack][0], switch_name)
        return True
    return False


def _truthy_int(v):
    try:
        return int(v) != 0
    except ValueError:
        return False


def batch_invariant(stack, environ=None):
    """vLLM: bool(int(VLLM_BATCH_INVARIANT)) (vllm/envs.py); SGLang:
    SGLANG_ENABLE_DETERMINISTIC_INFERENCE as its EnvBool reads it."""
    env = _env(environ)
    if stack == "vllm":
        return _truthy_int(env.get("VLLM_BATCH_INVARIANT", "0"))
    v = env.get("SGLANG_ENABLE_DETERMINISTIC_INFERENCE", "")
    return v.strip().lower() in ("1", "true", "yes", "y", "on")


# The paths that carry TP all-reduces around qr_comm, their settings, why
# and remedies are stack_info's (one table for this warning and for
# `python -m quickreduce doctor`).
_served = set()
_warned = set()


def serve_path(stack, path):
    """Declares that quickreduce now serves `path` (it leaves the warning)."""
    _served.add((stack, path))


def bypasses(stack, active):
    """The paths of `active` (stack_info.BYPASS_PATHS names that the
    configuration turns on) that quickreduce does not serve, in the table's
    order."""
    return [p for _, p, _, _, _ in stack_info.paths(stack) if p in active
            and (stack, p) not in _served]


def bypass_warning(stack, active):
    """The warning's text for `active`, or None when nothing bypasses."""
    paths = bypasses(stack, active)
    if not paths:
        return None
    parts = ["%s (%s; to route them to quickreduce: %s)" % (p, stack_info.why(stack, p),
                                                           stack_info.remedy(stack, p))
             for p in paths]
    return ("quickreduce is installed, but this configuration sends tensor-parallel all-reduces "
            "around it: " + "; ".join(parts))


def warn_bypass_once(stack, active, warn):
    """Calls warn(text) once per process and distinct text."""
    text = bypass_warning(stack, active)
    if text is not None and text not in _warned:
        _warned.add(text)
        warn(text)
    return text
