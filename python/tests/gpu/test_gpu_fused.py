"""GPU tests of the fused all-reduce + residual + RMSNorm in Python (torch
with CUDA, two ranks as spawned processes; run by python/tests/gpu/run.sh):
eager calls, a CUDA graph of torch.ops.quickreduce.all_reduce_residual_rmsnorm_
replayed with new inputs, and torch.compile(fullgraph=True); the FP8 form
eagerly and a CUDA graph of torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8
replayed with new inputs and scales; every output bit for bit against the host
reference."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import quickreduce as qr  # noqa: E402
import gpu_fused_ranks as ranks  # noqa: E402
from gpu_ranks import digest, spawn_ranks, to_torch  # noqa: E402

pytestmark = pytest.mark.gpu
ENV = {"QR_QUANTIZATION": "FP", "QR_MIN_SIZE_BYTES_MB": "0"}
_results = {}


def results():
    if not _results:
        _results.update(spawn_ranks(ranks.worker, "pyfusedgpu", ENV))
    return _results


def _reference(case, i, regime, dt, weight_index=None):
    inputs = [ranks.inputs(case, i, r) for r in range(2)]
    w = ranks.weight(case, i if weight_index is None else weight_index)
    o, ro = qr.reference_all_reduce_residual_rmsnorm(
        inputs, ranks.inputs(case, i, 100), w, ranks.EPS, regime, False,
        dtype="bfloat16" if dt == "bf16" else "float16")
    return digest(to_torch(o, dt)), digest(to_torch(ro, dt))


@pytest.mark.parametrize("i", range(len(ranks.CASES)))
def test_eager_matches_the_reference(i, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    case = ranks.CASES[i]
    want = _reference(case, i, case[3], case[2])
    assert [results()[r]["eager"][i] for r in range(2)] == [want, want]


def test_graph_replays_match_the_reference(monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    case = ranks.CASES[0]
    wants = [_reference(case, 1000 + k, None, "fp16", weight_index=0) for k in range(5)]
    for r in range(2):
        got = results()[r]["graph"]
        assert got == [wants[k % 5] for k in range(len(got))]


def test_torch_compile_fullgraph_matches_eager():
    for r in range(2):
        compiled, eager = results()[r]["compile"]
        assert compiled == eager


def _reference_fp8(case, i, regime, dt, scale, weight_index=None):
    inputs = [ranks.inputs(case, i, r) for r in range(2)]
    w = ranks.weight(case, i if weight_index is None else weight_index)
    q, o, ro = qr.reference_all_reduce_residual_rmsnorm_fp8(
        inputs, ranks.inputs(case, i, 100), w, ranks.EPS, scale, regime, False,
        dtype="bfloat16" if dt == "bf16" else "float16")
    return digest(torch.from_numpy(q)), digest(to_torch(o, dt)), digest(to_torch(ro, dt))


@pytest.mark.parametrize("i", range(len(ranks.CASES)))
def test_fp8_eager_matches_the_reference(i, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    case = ranks.CASES[i]
    want = _reference_fp8(case, i, case[3], case[2], ranks.FP8_SCALE)
    assert [results()[r]["fp8"][i] for r in range(2)] == [want, want]


def test_fp8_graph_replays_read_the_scale_each_time(monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    case = ranks.CASES[0]
    scales = ranks.FP8_REPLAY_SCALES
    wants = [_reference_fp8(case, 1000 + k % 5, None, "fp16", scales[k % len(scales)],
                            weight_index=0) for k in range(ranks.FP8_REPLAYS)]
    for r in range(2):
        assert results()[r]["fp8_graph"] == wants
