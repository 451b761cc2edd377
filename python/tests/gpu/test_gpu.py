"""GPU tests of the Python layer (torch with CUDA, two ranks as spawned
processes; run by python/tests/gpu/run.sh on the GPU machine): every regime
and dtype bit for bit against the host reference, torch's current stream
honoured, CUDA graph capture replayed 1000 times, torch.compile fullgraph."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import quickreduce as qr  # noqa: E402
import gpu_ranks  # noqa: E402

pytestmark = pytest.mark.gpu

_results = {}


def results():
    if not _results:
        _results.update(gpu_ranks.spawn_ranks(
            gpu_ranks.worker, "pygpu", {"QR_QUANTIZATION": "FP", "QR_MIN_SIZE_BYTES_MB": "0"}))
    return _results


CASES = gpu_ranks.matrix_cases()


@pytest.mark.parametrize("index, case", list(enumerate(CASES)),
                         ids=["%s-%s-%dB" % c for c in CASES])
def test_cuda_all_reduce_matches_the_reference(index, case, monkeypatch):
    regime, dt, nbytes = case
    got = [results()[r]["matrix"][index] for r in range(2)]
    monkeypatch.setenv("QR_QUANTIZATION", "FP")
    inputs = [gpu_ranks.host_input(dt, nbytes, r, gpu_ranks.SEED + index) for r in range(2)]
    ref = qr.reference_all_reduce(inputs, regime, dt == "bf16cast",
                                  dtype="bfloat16" if dt != "fp16" else "float16")
    assert got == [gpu_ranks.digest(gpu_ranks.to_torch(ref, dt))] * 2


def test_current_stream_is_honoured():
    for r in range(2):
        assert results()[r]["stream"] == (6.0, 6.0)  # 2 * (1 + 2), before the overwrite


def test_graph_replays_1000_times_correctly():
    for r in range(2):
        assert results()[r]["graph_bad"] == 0
        assert results()[r]["healthy_after_graphs"]


def test_graph_replay_matches_the_reference_bit_for_bit(monkeypatch):
    n2 = 2 * ((1 << 21) + 8)
    inputs = [gpu_ranks.host_input("fp16", n2, r, gpu_ranks.SEED + 999) for r in range(2)]
    monkeypatch.setenv("QR_QUANTIZATION", "FP")
    monkeypatch.setenv("QR_MIN_SIZE_BYTES_MB", "0")
    fp = gpu_ranks.digest(gpu_ranks.to_torch(qr.reference_all_reduce(inputs), "fp16"))
    int4 = gpu_ranks.digest(gpu_ranks.to_torch(qr.reference_all_reduce(inputs, "INT4", False),
                                               "fp16"))
    for r in range(2):
        assert results()[r]["graph_random"] == (fp, fp, int4)


def test_torch_compile_fullgraph_matches_eager():
    print("torch", results()[0]["torch"], "compile backend:", results()[0]["compile_backend"])
    for r in range(2):
        compiled, eager = results()[r]["compile"]
        assert compiled == eager
        assert results()[r]["graph_breaks"] == 0
