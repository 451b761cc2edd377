"""What a serving stack will do with quickreduce, read from its installed
version, its plugin allowlist and its configuration, without importing it.
Shared by `python -m quickreduce doctor` and the adapters.

Read against the stacks' own code:
- vLLM `vllm/plugins/__init__.py` (vllm-project/vllm@01425553): plugins of
  the `vllm.general_plugins` group load when VLLM_PLUGINS is unset, else only
  the names it lists (`VLLM_PLUGINS=""` loads none; vllm/envs.py splits on
  ",").
- SGLang `python/sglang/srt/plugins/__init__.py` (sgl-project/sglang@32c764af):
  `sglang.srt.plugins` entry points load when SGLANG_PLUGINS is unset or
  empty, else only the comma-separated names it lists.
- vLLM `vllm/config/compilation.py` (vllm-project/vllm@002284db), PassConfig:
  `fuse_allreduce_rms` (FlashInfer's fused all-reduce + RMSNorm),
  `enable_sp` (sequence parallelism: reduce-scatter + all-gather) and
  `fuse_gemm_comms` (async TP: GEMMs fused with their collectives) replace the
  tensor-parallel all-reduces that would reach quickreduce. Unset (None)
  means vLLM's optimization level decides (-O2 and above turn
  fuse_allreduce_rms on where FlashInfer supports the GPU).
- SGLang `python/sglang/srt/server_args.py` (sgl-project/sglang@469c63e5):
  `enable_flashinfer_allreduce_fusion` (also switched on by SGLang itself for
  some models on SM90/SM100) fuses the all-reduce into FlashInfer's kernel;
  `enable_symm_mem` sends in-place all-reduces to NCCL symmetric memory before
  quickreduce is asked when QR_SGLANG_FIRST makes the custom all-reduce
  decline.
"""

import importlib.metadata

PLUGIN_NAME = "quickreduce"  # the entry point name in both stacks' groups

STACKS = {
    # stack: (distribution, allowlist variable, entry point group)
    "vllm": ("vllm", "VLLM_PLUGINS", "vllm.general_plugins"),
    "sglang": ("sglang", "SGLANG_PLUGINS", "sglang.srt.plugins"),
}

# The one table of the stacks' settings that carry tensor-parallel
# all-reduces around quickreduce's slot, used by `quickreduce doctor` and by
# the adapters' once-only warning (integrations/_policy.py). Each entry:
# (stack, path, the setting's names (newest first; older vLLM releases used
# the later ones: vllm/config/compilation.py before the rename), what it does,
# what quickreduce's adapter does about it once installed (None: nothing)).
# `path` is the name the warning and the doctor report.
BYPASS_PATHS = [
    ("vllm", "fuse_allreduce_rms", ("fuse_allreduce_rms", "enable_fi_allreduce_fusion"),
     "FlashInfer's fused all-reduce + RMSNorm replaces the all-reduce",
     "the adapter runs the FlashInfer fused all-reduce + residual + RMSNorm calls it can take "
     "(16-bit, with or without a static FP8 output) through quickreduce's fused collective"),
    ("vllm", "enable_sp", ("enable_sp", "enable_sequence_parallelism"),
     "sequence parallelism turns the all-reduce into reduce-scatter + all-gather",
     "the adapter runs the reduce-scatter / all-gather calls it can take (16-bit, along "
     "dimension 0) through quickreduce's reduce-scatter and all-gather"),
    ("vllm", "fuse_gemm_comms", ("fuse_gemm_comms", "enable_async_tp"),
     "async TP fuses the collectives into the GEMMs (torch symmetric memory)", None),
    ("sglang", "enable_flashinfer_allreduce_fusion", ("enable_flashinfer_allreduce_fusion",),
     "FlashInfer's fused all-reduce + RMSNorm replaces the all-reduce",
     "the adapter runs the FlashInfer fused all-reduce + residual + RMSNorm calls it can take "
     "(16-bit) through quickreduce's fused collective"),
    ("sglang", "enable_symm_mem", ("enable_symm_mem",),
     "with QR_SGLANG_FIRST=1 the custom all-reduce declines and NCCL symmetric memory takes "
     "in-place all-reduces before quickreduce", None),
]


def paths(stack):
    """The BYPASS_PATHS entries of one stack, in the table's order."""
    return [e for e in BYPASS_PATHS if e[0] == stack]


def _get(settings, name):
    if isinstance(settings, dict):
        return settings.get(name)
    return getattr(settings, name, None)


def _vllm_passes(settings):
    """The pass config inside `settings`: a dict or PassConfig object, or a
    whole compilation config (dict or object) holding one as pass_config."""
    if isinstance(settings, dict):
        return dict(settings.get("pass_config") or {}) if "pass_config" in settings else settings
    inner = getattr(settings, "pass_config", None)
    return inner if inner is not None else settings


def _setting(stack, settings, names):
    """The first of `names` that `settings` sets (not None), else None."""
    source = _vllm_passes(settings) if stack == "vllm" else settings
    for n in names:
        v = _get(source, n)
        if v is not None:
            return v
    return None


def active(stack, settings, environ=None):
    """The paths (BYPASS_PATHS names) that `settings` turns on: vLLM's pass
    config (dict or PassConfig object, or a compilation config holding one
    as pass_config) or SGLang's server arguments (dict or ServerArgs); a
    setting counts when it is true. `environ` supplies QR_SGLANG_FIRST, which
    makes SGLang's symmetric memory a bypass. The SGLang adapter passes a
    dict with enable_symm_mem from the group's own is_symmetric_memory_enabled()."""
    settings = settings if settings is not None else {}
    out = []
    for _, path, names, _, _ in paths(stack):
        if _setting(stack, settings, names) is not True:
            continue
        if path == "enable_symm_mem" and (environ or {}).get("QR_SGLANG_FIRST") != "1":
            continue
        out.append(path)
    return out


def why(stack, path):
    return next(e[3] for e in paths(stack) if e[1] == path)


def served_by_adapter(stack, path):
    """What quickreduce's adapter does about `path` once installed, or None."""
    return next(e[4] for e in paths(stack) if e[1] == path)


def installed_version(stack):
    """The installed version of "vllm" or "sglang", or None."""
    try:
        return importlib.metadata.version(STACKS[stack][0])
    except importlib.metadata.PackageNotFoundError:
        return None


def plugin_allowed(stack, environ):
    """(allowed, why): whether the stack's plugin loader loads an entry point
    named PLUGIN_NAME under `environ` (the stacks' own rules, above)."""
    var = STACKS[stack][1]
    if stack == "vllm":
        if var not in environ:
            return True, "%s is unset: every plugin loads" % var
        names = environ[var].split(",")
    else:
        value = environ.get(var, "")
        if not value:
            return True, "%s is unset or empty: every plugin loads" % var
        names = [x.strip() for x in value.split(",") if x.strip()]
    if PLUGIN_NAME in names:
        return True, "%s lists %s" % (var, PLUGIN_NAME)
    return False, "%s=%r does not list %s" % (var, environ[var], PLUGIN_NAME)


def bypasses(stack, settings, environ=None):
    """The settings that route tensor-parallel all-reduces around quickreduce:
    a list of (path, why) for active(stack, settings, environ)."""
    return [(p, why(stack, p)) for p in active(stack, settings, environ)]


def remedy(stack, setting):
    """How to turn a bypassing setting off, in the stack's own terms."""
    if stack == "vllm":
        return ("-cc.pass_config.%s=False (or the same key in --compilation-config)" % setting +
                ("; -O1 leaves it off" if setting == "fuse_allreduce_rms" else ""))
    if setting == "enable_symm_mem":
        return "drop --enable-symm-mem, or unset QR_SGLANG_FIRST"
    return ("drop --%s; SGLang also turns it on by itself for some models on SM90/SM100, so "
            "check its start-up log for \"Enable FlashInfer AllReduce Fusion\"" %
            setting.replace("_", "-"))


def undecided(stack, settings):
    """vLLM passes left to its optimization level (unset in `settings`)."""
    if stack != "vllm":
        return []
    return [path for _, path, names, _, _ in paths(stack)
            if _setting(stack, settings or {}, names) is None]
