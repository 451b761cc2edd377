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

# vLLM PassConfig fields whose passes take tensor-parallel all-reduces away
# from the device communicator's all_reduce (where quickreduce sits).
VLLM_BYPASSING_PASSES = {
    "fuse_allreduce_rms": "FlashInfer's fused all-reduce + RMSNorm replaces the all-reduce",
    "enable_sp": "sequence parallelism turns the all-reduce into reduce-scatter + all-gather",
    "fuse_gemm_comms": "async TP fuses the collectives into the GEMMs",
}

# SGLang server arguments that route all-reduces around quickreduce.
SGLANG_BYPASSING_ARGS = {
    "enable_flashinfer_allreduce_fusion":
        "FlashInfer's fused all-reduce + RMSNorm replaces the all-reduce",
}


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
    a list of (setting, why). `settings` is vLLM's pass_config dict (or a whole
    compilation config holding one under "pass_config") or SGLang's server
    arguments as a dict; a setting is counted when it is true. `environ`
    (SGLang only) supplies QR_SGLANG_FIRST for the symmetric-memory case."""
    settings = dict(settings or {})
    out = []
    if stack == "vllm":
        passes = dict(settings.get("pass_config") or {}) if "pass_config" in settings else settings
        for name, why in VLLM_BYPASSING_PASSES.items():
            if passes.get(name) is True:
                out.append((name, why))
        return out
    for name, why in SGLANG_BYPASSING_ARGS.items():
        if settings.get(name) is True:
            out.append((name, why))
    if settings.get("enable_symm_mem") is True and (environ or {}).get("QR_SGLANG_FIRST") == "1":
        out.append(("enable_symm_mem", "with QR_SGLANG_FIRST=1 the custom all-reduce declines and "
                    "NCCL symmetric memory takes in-place all-reduces before quickreduce"))
    return out


def remedy(stack, setting):
    """How to turn a bypassing setting off, in the stack's own terms."""
    if stack == "vllm":
        return "-cc.pass_config.%s=False (or the same key in --compilation-config)" % setting
    if setting == "enable_symm_mem":
        return "drop --enable-symm-mem, or unset QR_SGLANG_FIRST"
    return ("drop --%s; SGLang also turns it on by itself for some models on SM90/SM100, so "
            "check its start-up log for \"Enable FlashInfer AllReduce Fusion\"" %
            setting.replace("_", "-"))


def undecided(stack, settings):
    """vLLM passes left to its optimization level (unset in `settings`)."""
    if stack != "vllm":
        return []
    settings = dict(settings or {})
    passes = dict(settings.get("pass_config") or {}) if "pass_config" in settings else settings
    return [name for name in VLLM_BYPASSING_PASSES if passes.get(name) is None]
