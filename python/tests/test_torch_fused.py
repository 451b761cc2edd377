"""The fused layer boundary with torch tensors on CPU (host backend):
Communicator.all_reduce_residual_rmsnorm bit for bit against the reference,
torch.ops.quickreduce.all_reduce_residual_rmsnorm(_) with their fake
implementations, the torch.distributed fallback, and torch.compile
(fullgraph=True) where this torch has it (the GPU machine's 2.11; Debian's
1.13 has none)."""

import os
import tempfile

import pytest

torch = pytest.importorskip("torch")

import quickreduce as qr  # noqa: E402
import quickreduce.ops  # noqa: E402,F401
from harness import run_processes, run_threads  # noqa: E402

HAS_COMPILE = hasattr(torch, "compile")
EPS = 1e-6


def _t(dtype, shape, who, seed=5):
    g = torch.Generator().manual_seed(seed * 100 + who)
    return torch.randn(*shape, generator=g).to(dtype)


def _bits(t):
    return t.contiguous().view(torch.int16).tolist()


def _ref(dtype, shape, ws=2, regime="FP", residual=True):
    inputs = [_t(dtype, shape, r) for r in range(ws)]
    res = _t(dtype, shape, 50) if residual else None
    return qr.reference_all_reduce_residual_rmsnorm(inputs, res, _t(dtype, shape[-1:], 60), EPS,
                                                    regime, False)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("regime", ["FP", "INT4"])
def test_tensors_match_the_reference(group_name, dtype, regime):
    shape = (24, 2048)  # 96 KiB: one-shot at the built-in ceiling
    def body(rank):
        x, res, w = _t(dtype, shape, rank), _t(dtype, shape, 50), _t(dtype, shape[-1:], 60)
        with qr.Communicator(group_name, rank, 2) as c:
            out, ro = c.all_reduce_residual_rmsnorm(x, res, w, EPS, regime=regime,
                                                    cast_bf16_to_fp16=False)
            x2, res2 = x.clone(), res.clone()
            c.all_reduce_residual_rmsnorm(x2, res2, w, EPS, out=x2, residual_out=res2,
                                          regime=regime, cast_bf16_to_fp16=False)
        return _bits(out), _bits(ro), _bits(x2), _bits(res2)
    ref_out, ref_ro = _ref(dtype, shape, regime=regime)
    assert isinstance(ref_out, torch.Tensor) and ref_out.dtype == dtype
    for out, ro, x2, res2 in run_threads(2, body):
        assert out == x2 == _bits(ref_out)
        assert ro == res2 == _bits(ref_ro)


def test_fused_ops_have_fake_implementations():
    x = torch.empty(4, 64, dtype=torch.bfloat16, device="meta")
    w = torch.empty(64, dtype=torch.bfloat16, device="meta")
    out, ro = torch.ops.quickreduce.all_reduce_residual_rmsnorm(x, x, w, EPS, "no-such-group")
    assert out.shape == ro.shape == x.shape and out.device.type == "meta"
    assert torch.ops.quickreduce.all_reduce_residual_rmsnorm_(x, x, w, EPS, "nobody") is None
    schema = str(torch.ops.quickreduce.all_reduce_residual_rmsnorm_.default._schema)
    assert "Tensor(a!) input" in schema and "Tensor(b!) residual" in schema


def test_fused_ops_run_quickreduce(group_name, monkeypatch):
    monkeypatch.setenv("QR_QUANTIZATION", "FP")
    shape = (8, 512)
    def body(rank):
        x, res, w = _t(torch.float16, shape, rank), _t(torch.float16, shape, 50), \
            _t(torch.float16, shape[-1:], 60)
        with qr.Communicator(group_name, rank, 2, name="%s-r%d" % (group_name, rank)) as c:
            out, ro = torch.ops.quickreduce.all_reduce_residual_rmsnorm(x, res, w, EPS, c.name)
            none_out, none_ro = torch.ops.quickreduce.all_reduce_residual_rmsnorm(
                x, None, w, EPS, c.name)
            torch.ops.quickreduce.all_reduce_residual_rmsnorm_(x, res, w, EPS, c.name)
        return _bits(out), _bits(ro), _bits(x), _bits(res), _bits(none_out), _bits(none_ro)
    ref_out, ref_ro = _ref(torch.float16, shape)
    none_out, none_ro = _ref(torch.float16, shape, residual=False)
    for got in run_threads(2, body):
        assert got == (_bits(ref_out), _bits(ref_ro), _bits(ref_out), _bits(ref_ro),
                       _bits(none_out), _bits(none_ro))


def _gloo_rank(rank, init_file, compile_it):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
    try:
        comm = qr.Communicator.from_process_group()
        name = comm.name

        def step(x, res, w):
            return torch.ops.quickreduce.all_reduce_residual_rmsnorm(x, res, w, EPS, name)

        fn = torch.compile(step, fullgraph=True, backend="aot_eager") if compile_it else step
        x, res, w = (_t(torch.float16, (4, 256), rank), _t(torch.float16, (4, 256), 50),
                     _t(torch.float16, (256,), 60))
        fast = fn(x, res, w)
        comm.close()  # the same function now falls back to torch.distributed
        slow = fn(x, res, w)
        return [_bits(t) for t in fast], [t.float().tolist() for t in slow]
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("compile_it", [
    False,
    pytest.param(True, marks=pytest.mark.skipif(not HAS_COMPILE,
                                                reason="torch %s has no torch.compile"
                                                % torch.__version__)),
], ids=["eager", "compiled"])
def test_fused_op_falls_back_at_run_time(compile_it, monkeypatch):
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _gloo_rank, os.path.join(d, "init"), compile_it,
                                env={"QR_QUANTIZATION": "FP"}, timeout=240)
    ref_out, ref_ro = _ref(torch.float16, (4, 256))
    for fast, slow in results:
        assert fast == [_bits(ref_out), _bits(ref_ro)]
        # The fallback sums in another order: the same values within fp16 roundings.
        assert torch.allclose(torch.tensor(slow[1]), ref_ro.float(), rtol=2e-3, atol=2e-3)
        assert torch.allclose(torch.tensor(slow[0]), ref_out.float(), rtol=1e-2, atol=1e-2)
