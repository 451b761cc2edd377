"""Two quickreduce groups in one process, on one stream: the shape of vLLM's
test_quick_all_reduce.py (gpu/test_gpu_vllm_port.py), where group A's
out-of-place all-reduce of x is followed by group B's in-place all-reduce
of the same x, twice, eagerly or captured in one CUDA graph. Every rank
draws the same integers, so A's output is exactly 2 * x and B leaves 2 * x
in x, in FP (sums of at most 44 are exact in fp16 and bf16); B in INT8 is
checked against the host reference's bits.

Each case is its own test, so that one GPU run tells which ingredient a
failure needs: the capture, B's regime, A's cast, the dtype. A failure
message describes the wrong elements (how many, out / expected ratios,
which 32 KiB tiles), to tell "never written" (ratio 0) from "read after B
doubled x" (ratio 2), and the groups' status tells a timed-out wait apart."""

import functools
import os
import pickle

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import gpu_ranks  # noqa: E402

pytestmark = pytest.mark.gpu
SIZE = 9 * 1024 * 1024 + 8  # elements: vLLM's sizes are 8-10 Mi
TILE_ELEMS = 16384  # kernels/geometry.h kTileElems


def describe_mismatch(torch, got, want):
    """'' when equal, else what differs (count, ratios, tiles)."""
    bad = (got.float() != want.float()).nonzero().flatten()
    if bad.numel() == 0:
        return ""
    ratio = (got.float()[bad] / want.float()[bad]).cpu()
    values, counts = torch.unique(torch.round(ratio * 100) / 100, return_counts=True)
    top = sorted(zip(counts.tolist(), values.tolist()), reverse=True)[:4]
    tiles = torch.unique(bad.cpu() // TILE_ELEMS)
    return ("%d of %d wrong (%.1f %%); out/expected ratios (count, ratio) %s; %d of %d tiles, "
            "first %s" % (bad.numel(), got.numel(), 100.0 * bad.numel() / got.numel(), top,
                          tiles.numel(), (got.numel() + TILE_ELEMS - 1) // TILE_ELEMS,
                          tiles[:12].tolist()))


def _worker(rank, group, results_path, case):
    """spawn_ranks' worker: pickles this rank's problems ('' when none)."""
    import quickreduce as qr
    capture, regime_b, cast_a, dtype_name = case
    dev = gpu_ranks.gpus()[rank]
    torch.cuda.set_device(dev)
    device = torch.device("cuda", dev)
    # A as the vLLM adapter's group: FP configured (QR_QUANTIZATION, the
    # cast as vLLM's variable sets it), called without a regime
    # (qr_all_reduce, the configured path); B forces its regime.
    os.environ["QR_QUANTIZATION"] = "FP"
    os.environ["QR_CAST_BF16_TO_FP16"] = "1" if cast_a else "0"
    a = qr.Communicator(group + "-a", rank, 2, device)
    b = qr.Communicator(group + "-b", rank, 2, device)
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device=device).manual_seed(42)
    x1 = torch.randint(1, 23, (SIZE,), dtype=dtype, device=device, generator=gen)
    x2 = torch.randint(-23, 1, (SIZE,), dtype=dtype, device=device, generator=gen)
    want1, want2 = x1 * 2, x2 * 2
    # B's in-place result: exactly 2 * x in FP; in INT8 the codec's bits
    # (small integers are not all exact there), from the host reference.
    wantb1, wantb2 = [
        qr.reference_all_reduce([x.cpu(), x.cpu()], regime=regime_b,
                                cast_bf16_to_fp16=False).to(device) for x in (x1, x2)]

    def body():
        o1 = a.all_reduce(x1)
        b.all_reduce(x1, out=x1, regime=regime_b, cast_bf16_to_fp16=False)
        o2 = a.all_reduce(x2)
        b.all_reduce(x2, out=x2, regime=regime_b, cast_bf16_to_fp16=False)
        return o1, o2

    if capture:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            out1, out2 = body()
        graph.replay()
    else:
        out1, out2 = body()
    torch.cuda.synchronize()
    problems = []
    # A group that failed (a wait timed out, a peer aborted) leaves outputs
    # unwritten: its status tells that apart from wrong data.
    for label, comm in (("A", a), ("B", b)):
        try:
            comm.check()
        except qr.QuickReduceError as e:
            problems.append("%s failed: %s" % (label, e))
    for label, got, want in (("A's out1", out1, want1), ("A's out2", out2, want2),
                             ("B's x1", x1, wantb1), ("B's x2", x2, wantb2)):
        why = describe_mismatch(torch, got, want)
        if why:
            problems.append("%s: %s" % (label, why))
    a.close()
    b.close()
    with open(results_path, "wb") as f:
        pickle.dump("; ".join(problems), f)
    return True


CASES = [(capture, regime_b, cast_a, dt)
         for capture in (False, True)
         for regime_b in ("FP", "INT8")
         for cast_a, dt in ((False, "float16"), (False, "bfloat16"), (True, "bfloat16"))]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-B%s-%s%s" % (
    "graph" if c[0] else "eager", c[1], c[3], "-cast" if c[2] else ""))
def test_two_groups_one_stream(case):
    name = "two-groups-%s-%s-%d-%s" % ("graph" if case[0] else "eager", case[1], case[2], case[3])
    results = gpu_ranks.spawn_ranks(functools.partial(_worker, case=case), name, {}, timeout=300)
    problems = ["rank %d: %s" % (r, p) for r, p in sorted(results.items()) if p]
    assert not problems, "\n".join(problems)
