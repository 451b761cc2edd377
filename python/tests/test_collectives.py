"""Communicator.reduce_scatter / .all_gather (NumPy arrays and CPU tensors on
the host backend) and the torch ops quickreduce.reduce_scatter / all_gather
with their fake implementations and their torch.distributed fallback.
docs/collectives.md is what they compute; the C++ tests
(kernels/*_reference_test.cc, tests/e2e/collectives_test.cc) check every codec
bit for bit, these the Python layer: shapes, out=, in place, the regime and
cast reaching the library, refusals."""

import numpy as np
import pytest

import quickreduce as qr
from harness import run_threads


def _inputs(n, ws, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float16) for _ in range(ws)]


@pytest.mark.parametrize("ws", [2, 4])
def test_numpy_reduce_scatter_fp_is_the_all_reduce_slice(group_name, ws):
    n = 8 * 1024 + 8 * ws  # shards of n / ws values: odd multiples of 16 bytes
    xs = _inputs(n, ws)
    def body(rank):
        with qr.Communicator(group_name, rank, ws) as c:
            y = c.reduce_scatter(xs[rank], regime="FP", cast_bf16_to_fp16=False)
            o = np.empty(n // ws, dtype=np.float16)
            r = c.reduce_scatter(xs[rank], out=o, regime="FP", cast_bf16_to_fp16=False)
            assert r is o
            z = xs[rank].copy()
            c.reduce_scatter(z, out=z[rank * (n // ws):(rank + 1) * (n // ws)], regime="FP",
                             cast_bf16_to_fp16=False)
            return y, o, z[rank * (n // ws):(rank + 1) * (n // ws)].copy()
    results = run_threads(ws, body)
    ref = qr.reference_all_reduce(xs, "FP", False)
    for rank, per_rank in enumerate(results):
        want = ref[rank * (n // ws):(rank + 1) * (n // ws)]
        for got in per_rank:
            assert got.shape == (n // ws,)
            assert got.view(np.uint16).tolist() == want.view(np.uint16).tolist()


@pytest.mark.parametrize("ws", [2, 4])
def test_numpy_all_gather_fp_copies_bits(group_name, ws):
    n = 24
    rng = np.random.default_rng(5)
    xs = [rng.integers(0, 1 << 16, n, dtype=np.uint16) for _ in range(ws)]  # NaNs included
    def body(rank):
        with qr.Communicator(group_name, rank, ws) as c:
            y = c.all_gather(xs[rank], regime="FP", dtype="bf16", cast_bf16_to_fp16=True)
            z = np.zeros(ws * n, dtype=np.uint16)
            z[rank * n:(rank + 1) * n] = xs[rank]
            c.all_gather(z[rank * n:(rank + 1) * n], out=z, regime="FP", dtype="fp16")
            return y, z
    for y, z in run_threads(ws, body):
        assert y.shape == (ws * n,)
        assert y.tolist() == np.concatenate(xs).tolist()
        assert z.tolist() == np.concatenate(xs).tolist()


def test_regime_and_configured_default_reach_the_library(group_name, monkeypatch):
    # Two-shot for every size, so INT4 really quantizes.
    monkeypatch.setenv("QR_ONE_SHOT_MAX_KB", "0")
    monkeypatch.setenv("QR_QUANTIZATION", "INT4")
    n = 4096
    xs = _inputs(n, 2, seed=9)
    def body(rank):
        with qr.Communicator(group_name, rank, 2) as c:
            fp = c.all_gather(xs[rank], regime="FP")
            int4 = c.all_gather(xs[rank], regime="INT4")
            configured = c.all_gather(xs[rank])
            rs_fp = c.reduce_scatter(xs[rank], regime="FP")
            rs_configured = c.reduce_scatter(xs[rank])
            return fp, int4, configured, rs_fp, rs_configured
    (fp0, q0, c0, rsf0, rsc0), (fp1, q1, c1, rsf1, rsc1) = run_threads(2, body)
    assert fp0.tolist() == np.concatenate(xs).tolist()
    assert q0.view(np.uint16).tolist() == q1.view(np.uint16).tolist()  # same bits everywhere
    assert q0.view(np.uint16).tolist() != fp0.view(np.uint16).tolist()  # lossy: quantized
    assert c0.view(np.uint16).tolist() == q0.view(np.uint16).tolist()  # QR_QUANTIZATION=INT4
    assert rsc0.view(np.uint16).tolist() != rsf0.view(np.uint16).tolist()
    # Within INT4's reach of the exact values: 1/15 of each block's largest magnitude.
    assert np.max(np.abs(q0.astype(np.float32) - fp0.astype(np.float32))) <= \
        np.max(np.abs(fp0.astype(np.float32))) / 15 * 1.01


def test_refusals_raise_before_anything_runs(group_name):
    def body(rank):
        with qr.Communicator(group_name, rank, 2) as c:
            errors = []
            for call in (
                lambda: c.reduce_scatter(np.zeros(12, np.float16), regime="FP"),  # 12-byte shards
                lambda: c.reduce_scatter(np.zeros(17, np.float16), regime="FP"),  # not 2 shards
                lambda: c.all_gather(np.zeros(8, np.float32), regime="FP"),
                lambda: c.all_gather(np.zeros(8, np.float16), out=np.zeros(8, np.float16),
                                     regime="FP"),
                lambda: c.all_gather(np.zeros(8, np.float16), regime="NONE"),
            ):
                try:
                    call()
                    errors.append(None)
                except (qr.InvalidArgument, qr.Unsupported) as e:
                    errors.append(type(e).__name__)
            ok = c.all_gather(np.full(8, rank, np.float16), regime="FP")
            return errors, ok.tolist()
    for errors, ok in run_threads(2, body):
        assert errors == ["InvalidArgument"] * 4 + ["Unsupported"]
        assert ok == [0.0] * 8 + [1.0] * 8


torch = pytest.importorskip("torch")
import quickreduce.ops  # noqa: E402,F401


def test_torch_tensors_and_ops(group_name):
    rows, cols = 6, 8  # 3 rows per rank: 48-byte shards
    def inp(rank):
        g = torch.Generator().manual_seed(rank)
        return torch.randn(rows, cols, generator=g).to(torch.bfloat16)
    def body(rank):
        name = "%s-r%d" % (group_name, rank)  # ranks as threads: one name each for the ops
        with qr.Communicator(group_name, rank, 2, name=name) as c:
            x = inp(rank)
            rs = c.reduce_scatter(x, regime="FP", cast_bf16_to_fp16=False)
            ag = c.all_gather(x, regime="FP")
            op_rs = torch.ops.quickreduce.reduce_scatter(x, 2, name)
            op_ag = torch.ops.quickreduce.all_gather(x, 2, name)
            return rs, ag, op_ag, op_rs
    results = run_threads(2, body)
    total = (inp(0).float() + inp(1).float()).to(torch.bfloat16)  # one rounding of 2 terms
    for rank, (rs, ag, op_ag, op_rs) in enumerate(results):
        assert rs.shape == (3, cols) and rs.dtype == torch.bfloat16
        assert torch.equal(rs, total[rank * 3:(rank + 1) * 3])
        assert ag.shape == (2 * rows, cols)
        assert torch.equal(ag, torch.cat([inp(0), inp(1)]))
        assert torch.equal(op_ag, ag)
        assert op_rs.shape == (3, cols)


def test_torch_op_fakes_give_shapes_without_a_communicator():
    x = torch.empty(8, 4, dtype=torch.float16, device="meta")
    assert torch.ops.quickreduce.reduce_scatter(x, 4, "nobody").shape == (2, 4)
    assert torch.ops.quickreduce.all_gather(x, 4, "nobody").shape == (32, 4)


def test_torch_op_without_communicator_or_fallback_raises():
    with pytest.raises(Exception, match="no fallback group"):
        torch.ops.quickreduce.all_gather(torch.zeros(8, dtype=torch.float16), 2, "nobody-here")
