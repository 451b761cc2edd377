"""The adapters' policy without a stack: the alias table (every variable and
value vLLM, SGLang and AITER accept, read with their meaning), the opt-in and
off-switch rules, batch invariance, and the bypass warning's text.

The parsers mirrored: vLLM vllm/envs.py (VLLM_ROCM_QUICK_REDUCE_*: QUANTIZATION
is env_with_choices, CAST is .lower() in ("true", "1"), the sizes int()) and
quick_all_reduce.py @02cdf876 (INT3; MIN < 0 raises); SGLang
python/sglang/srt/distributed/device_communicators/quick_all_reduce.py
@054be181 (int(ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16); MAX_SIZE 0 = 2 GB; no
INT3); AITER aiter/dist/device_communicators/quick_all_reduce.py @aca1a950
(FP8 in the regime list; int() cast; MAX 0 = 2 GB)."""

import pytest

from quickreduce import stack_info
from quickreduce.integrations import _aliases, _policy
from quickreduce.integrations._aliases import UNSET, AliasError

# (stack, {their variable: value}, {our variable: value or UNSET})
TABLE = [
    # vLLM
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "INT6"}, {"QR_QUANTIZATION": "INT6"}),
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "INT3"}, {"QR_QUANTIZATION": "INT3"}),
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "NONE"}, {"QR_QUANTIZATION": "NONE"}),
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16": "True"}, {"QR_CAST_BF16_TO_FP16": "1"}),
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16": "1"}, {"QR_CAST_BF16_TO_FP16": "1"}),
    # vLLM reads anything but true/1 as off; ours would read "yes" as on.
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16": "yes"}, {"QR_CAST_BF16_TO_FP16": "0"}),
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16": "0"}, {"QR_CAST_BF16_TO_FP16": "0"}),
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB": "512"}, {"QR_MAX_SIZE_BYTES_MB": "512"}),
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB": "0"}, {"QR_MIN_SIZE_BYTES_MB": "0"}),
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION_MIN_SIZE_KB": "64"},
     {"QR_QUANTIZATION_MIN_SIZE_KB": "64"}),
    # SGLang
    ("sglang", {"ROCM_QUICK_REDUCE_QUANTIZATION": "INT4"}, {"QR_QUANTIZATION": "INT4"}),
    ("sglang", {"ROCM_QUICK_REDUCE_QUANTIZATION": "FP"}, {"QR_QUANTIZATION": "FP"}),
    ("sglang", {"ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16": "0"}, {"QR_CAST_BF16_TO_FP16": "0"}),
    ("sglang", {"ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16": "2"}, {"QR_CAST_BF16_TO_FP16": "1"}),
    ("sglang", {"ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB": "0"}, {"QR_MAX_SIZE_BYTES_MB": UNSET}),
    ("sglang", {"ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB": "64"}, {"QR_MAX_SIZE_BYTES_MB": "64"}),
    # AITER, under either stack
    ("sglang", {"AITER_QUICK_REDUCE_QUANTIZATION": "FP8"}, {"QR_QUANTIZATION": "INT8"}),
    ("vllm", {"AITER_QUICK_REDUCE_QUANTIZATION": "INT3"}, {"QR_QUANTIZATION": "INT3"}),
    ("vllm", {"AITER_QUICK_REDUCE_CAST_BF16_TO_FP16": "0"}, {"QR_CAST_BF16_TO_FP16": "0"}),
    ("vllm", {"AITER_QUICK_REDUCE_MAX_SIZE_BYTES_MB": "0"}, {"QR_MAX_SIZE_BYTES_MB": UNSET}),
    # The stack's own name wins over AITER's; ours wins over both.
    ("sglang", {"ROCM_QUICK_REDUCE_QUANTIZATION": "INT6",
                "AITER_QUICK_REDUCE_QUANTIZATION": "INT4"}, {"QR_QUANTIZATION": "INT6"}),
    ("vllm", {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "INT6", "QR_QUANTIZATION": "FP"}, {}),
    # A stack does not read the other's names.
    ("vllm", {"ROCM_QUICK_REDUCE_QUANTIZATION": "INT4"}, {}),
    ("sglang", {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "INT4"}, {}),
]


@pytest.mark.parametrize("stack,theirs,ours", TABLE)
def test_every_alias_value_means_what_its_stack_means(stack, theirs, ours):
    got = {k: v for k, (v, _) in _aliases.resolve(stack, dict(theirs)).items()}
    assert got == ours


@pytest.mark.parametrize("stack,name,value", [
    ("vllm", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "int4"),  # case-sensitive choices
    ("vllm", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "FP8"),
    ("vllm", "VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB", "0"),
    ("vllm", "VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB", "big"),
    ("vllm", "VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB", "-1"),
    ("sglang", "ROCM_QUICK_REDUCE_QUANTIZATION", "INT3"),  # SGLang's enum has no INT3
    ("sglang", "ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16", "true"),  # int("true") fails there
    ("sglang", "ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB", "-5"),
    ("sglang", "AITER_QUICK_REDUCE_QUANTIZATION", "INT8"),  # AITER's 8-bit codec is FP8
])
def test_a_value_the_stack_refuses_is_a_clear_error(stack, name, value):
    with pytest.raises(AliasError) as e:
        _aliases.resolve(stack, {name: value})
    assert name in str(e.value) and repr(value) in str(e.value)


def test_apply_writes_ours_and_leaves_sglang_max_zero_to_our_default():
    env = {"ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB": "0", "ROCM_QUICK_REDUCE_QUANTIZATION": "INT4"}
    lines = []
    _aliases.apply("sglang", env, log=lambda *a: lines.append(a[0] % a[1:]))
    assert env["QR_QUANTIZATION"] == "INT4"
    assert "QR_MAX_SIZE_BYTES_MB" not in env  # the library's default is 2 GB, as SGLang's 0
    assert any("keeps its default" in line for line in lines)


@pytest.mark.parametrize("stack", ["vllm", "sglang"])
def test_opt_in(stack):
    switch, _, allowlist = _policy.STACKS[stack]
    own = {"vllm": "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION",
           "sglang": "ROCM_QUICK_REDUCE_QUANTIZATION"}[stack]
    assert not _policy.enabled(stack, {})
    # The stack's own quick-reduce setting configures, never enables.
    assert not _policy.enabled(stack, {own: "INT4", "QR_QUANTIZATION": "INT4"})
    assert _policy.enabled(stack, {switch: "1"})
    assert _policy.enabled(stack, {allowlist: "other, quickreduce"})
    assert not _policy.enabled(stack, {allowlist: "other"})
    assert not _policy.enabled(stack, {allowlist: "quickreduce", switch: "0"})


def test_the_stacks_off_switch_holds_unless_overridden():
    said = []
    assert _policy.admit("vllm", False, "--disable-custom-all-reduce", said.append, {})
    assert not _policy.admit("vllm", True, "--disable-custom-all-reduce", said.append,
                             {"VLLM_PLUGINS": "quickreduce"})
    assert not said
    assert _policy.admit("vllm", True, "--disable-custom-all-reduce",
                         lambda *a: said.append(a[0] % a[1:]), {"QR_VLLM": "1"})
    assert said and "QR_VLLM=1 overrides --disable-custom-all-reduce" in said[0]


def test_batch_invariance_as_each_stack_reads_it():
    assert _policy.batch_invariant("vllm", {"VLLM_BATCH_INVARIANT": "1"})
    assert not _policy.batch_invariant("vllm", {"VLLM_BATCH_INVARIANT": "0"})
    assert not _policy.batch_invariant("vllm", {"SGLANG_ENABLE_DETERMINISTIC_INFERENCE": "1"})
    assert _policy.batch_invariant("sglang", {"SGLANG_ENABLE_DETERMINISTIC_INFERENCE": "true"})
    assert not _policy.batch_invariant("sglang", {})


def test_the_bypass_warning_names_the_flags_and_a_served_path_leaves_it():
    text = _policy.bypass_warning("vllm", {"fuse_allreduce_rms", "enable_sp"})
    assert "fuse_allreduce_rms" in text and "enable_sp" in text and "fuse_gemm_comms" not in text
    assert "-O1" in text
    assert _policy.bypass_warning("vllm", set()) is None
    sg = _policy.bypass_warning("sglang", {"enable_symm_mem"})
    assert "--enable-symm-mem" in sg and "QR_SGLANG_FIRST" in sg
    warned = []
    _policy.warn_bypass_once("vllm", {"enable_sp"}, warned.append)
    _policy.warn_bypass_once("vllm", {"enable_sp"}, warned.append)
    assert len(warned) == 1
    try:
        _policy.serve_path("vllm", "enable_sp")
        assert _policy.bypass_warning("vllm", {"enable_sp"}) is None
        assert "fuse_allreduce_rms" in _policy.bypass_warning("vllm",
                                                              {"enable_sp", "fuse_allreduce_rms"})
    finally:
        _policy._served.discard(("vllm", "enable_sp"))


# --- one table for the warning and the doctor (stack_info.BYPASS_PATHS) ---

class _PassConfig:
    """The attributes of vLLM's PassConfig the adapter reads (vllm/config/
    compilation.py; older releases: enable_fi_allreduce_fusion,
    enable_sequence_parallelism, enable_async_tp)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


@pytest.mark.parametrize("stack,path", [(e[0], e[1]) for e in stack_info.BYPASS_PATHS])
def test_the_warning_and_the_doctor_name_a_path_alike(stack, path):
    text = _policy.bypass_warning(stack, {path})
    assert stack_info.why(stack, path) in text and stack_info.remedy(stack, path) in text
    settings = {"pass_config": {path: True}} if stack == "vllm" else {path: True}
    environ = {"QR_SGLANG_FIRST": "1"}
    assert [p for p, _ in stack_info.bypasses(stack, settings, environ)] == [path]


def test_older_vllm_pass_names_count_for_the_doctor_as_for_the_adapter():
    for old, path in (("enable_fi_allreduce_fusion", "fuse_allreduce_rms"),
                      ("enable_sequence_parallelism", "enable_sp"),
                      ("enable_async_tp", "fuse_gemm_comms")):
        assert stack_info.active("vllm", _PassConfig(**{old: True})) == [path]
        assert [p for p, _ in stack_info.bypasses("vllm", {"pass_config": {old: True}})] == [path]
        assert path not in stack_info.undecided("vllm", {old: False})
    # The newer name wins where both are set.
    assert stack_info.active("vllm", {"fuse_allreduce_rms": False,
                                      "enable_fi_allreduce_fusion": True}) == []


def test_sglang_symmetric_memory_counts_only_with_qr_sglang_first():
    assert stack_info.active("sglang", {"enable_symm_mem": True}, {}) == []
    assert stack_info.active("sglang", {"enable_symm_mem": True},
                             {"QR_SGLANG_FIRST": "1"}) == ["enable_symm_mem"]
