"""GPU tests of the Python layer (torch with CUDA, two ranks as spawned
processes; run by python/tests/gpu/run.sh on the GPU machine): every regime
and dtype bit for bit against the host reference, torch's current stream
honoured, CUDA graph capture replayed 1000 times, torch.compile fullgraph."""

import multiprocessing as mp
import os
import pickle
import tempfile

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import quickreduce as qr  # noqa: E402
import gpu_ranks  # noqa: E402

pytestmark = pytest.mark.gpu

_results = {}


def _run_worker(rank, group, path, q):
    try:
        q.put((rank, gpu_ranks.worker(rank, group, path), None))
    except BaseException as e:
        import traceback
        q.put((rank, False, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())))


def results():
    if not _results:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        d = tempfile.mkdtemp(prefix="qrgpu-")
        group = "pygpu-%d" % os.getpid()
        paths = [os.path.join(d, "r%d.pkl" % r) for r in range(2)]
        env = {"QR_QUANTIZATION": "FP", "QR_MIN_SIZE_BYTES_MB": "0"}
        os.environ.update(env)
        procs = [ctx.Process(target=_run_worker, args=(r, group, paths[r], q)) for r in range(2)]
        for p in procs:
            p.start()
        errors = []
        for _ in procs:
            rank, ok, err = q.get(timeout=600)
            if not ok:
                errors.append("rank %d: %s" % (rank, err))
        for p in procs:
            p.join(30)
        assert not errors, "\n".join(errors)
        for r in range(2):
            with open(paths[r], "rb") as f:
                _results[r] = pickle.load(f)
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
