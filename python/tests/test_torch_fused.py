"""The fused layer boundary with torch tensors on CPU (host backend):
Communicator.all_reduce_residual_rmsnorm(_fp8) bit for bit against the
reference, torch.ops.quickreduce.all_reduce_residual_rmsnorm(_, _fp8) with
their fake implementations, the torch.distributed fallback (the FP8 op's
quantization checked against tests/e4m3.py over every float16 value), and
torch.compile (fullgraph=True) where this torch has it (the GPU machine's
2.11; Debian's 1.13 has none, nor float8_e4m3fn: there the FP8 op's quant
is uint8 codes)."""

import os
import tempfile

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402

import e4m3  # noqa: E402
import quickreduce as qr  # noqa: E402
import quickreduce.ops  # noqa: E402,F401
from harness import run_processes, run_threads  # noqa: E402
from quickreduce import _fused_ops  # noqa: E402

HAS_COMPILE = hasattr(torch, "compile")
# The fallback tests run the op as called and under torch.compile where it exists.
EAGER_AND_COMPILED = pytest.mark.parametrize("compile_it", [
    False,
    pytest.param(True, marks=pytest.mark.skipif(not HAS_COMPILE,
                                                reason="torch %s has no torch.compile"
                                                % torch.__version__)),
], ids=["eager", "compiled"])
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


@EAGER_AND_COMPILED
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


# --- the FP8 form ---

QUANT_DTYPE = getattr(torch, "float8_e4m3fn", torch.uint8)
SCALE = 0.125


def _codes(t):
    """A quant tensor's e4m3fn codes as a list of ints."""
    return t.contiguous().view(torch.uint8).tolist()


def _ref_fp8(dtype, shape, ws=2, regime="FP", residual=True):
    inputs = [_t(dtype, shape, r) for r in range(ws)]
    res = _t(dtype, shape, 50) if residual else None
    return qr.reference_all_reduce_residual_rmsnorm_fp8(
        inputs, res, _t(dtype, shape[-1:], 60), EPS, SCALE, regime, False)


def _want_codes(norm):
    """tests/e4m3.py's quantization of a norm tensor by SCALE."""
    return e4m3.quantize(norm.float().numpy(), SCALE).tolist()


def test_fp8_op_has_a_fake_implementation():
    x = torch.empty(4, 64, dtype=torch.bfloat16, device="meta")
    w = torch.empty(64, dtype=torch.bfloat16, device="meta")
    s = torch.empty(1, dtype=torch.float32, device="meta")
    q, out, ro = torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8(x, x, w, s, EPS, "nobody")
    assert q.shape == out.shape == ro.shape == x.shape
    assert q.dtype == QUANT_DTYPE and out.dtype == ro.dtype == x.dtype
    assert q.device.type == "meta"
    schema = str(torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8.default._schema)
    assert "Tensor? residual" in schema and "Tensor scale" in schema and "(a!)" not in schema


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fp8_tensors_and_op_match_the_reference(group_name, dtype, monkeypatch):
    monkeypatch.setenv("QR_QUANTIZATION", "FP")
    shape = (8, 512)
    def body(rank):
        x, res, w = _t(dtype, shape, rank), _t(dtype, shape, 50), _t(dtype, shape[-1:], 60)
        scale = torch.tensor([SCALE])  # [1] here, [1, 1] in vLLM, [] below
        with qr.Communicator(group_name, rank, 2, name="%s-r%d" % (group_name, rank)) as c:
            q, out, ro = c.all_reduce_residual_rmsnorm_fp8(x, res, w, EPS, scale)
            assert q.dtype == QUANT_DTYPE and q.shape == x.shape
            given = torch.empty(shape, dtype=torch.uint8)
            x2, res2 = x.clone(), res.clone()
            q2, _, _ = c.all_reduce_residual_rmsnorm_fp8(x2, res2, w, EPS, scale.reshape([1, 1]),
                                                         out=x2, residual_out=res2,
                                                         quant_out=given)
            assert q2 is given
            op = torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8(
                x, res, w, scale.reshape([]), EPS, c.name)
            op_none = torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8(
                x, None, w, scale, EPS, c.name)
            with pytest.raises(qr.InvalidArgument, match="one float32"):
                torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8(
                    x, res, w, torch.tensor([SCALE, SCALE]), EPS, c.name)
            with pytest.raises(qr.InvalidArgument, match="quant_out has dtype"):
                c.all_reduce_residual_rmsnorm_fp8(x, res, w, EPS, scale,
                                                  quant_out=torch.empty(shape, dtype=dtype))
            c.all_reduce_residual_rmsnorm(x, res, w, EPS)  # still in step
        return ([_codes(q), _bits(out), _bits(ro)], [_codes(q2), _bits(x2), _bits(res2)],
                [_codes(op[0]), _bits(op[1]), _bits(op[2])],
                [_codes(op_none[0]), _bits(op_none[1]), _bits(op_none[2])])
    ref_q, ref_out, ref_ro = _ref_fp8(dtype, shape)
    none_q, none_out, none_ro = _ref_fp8(dtype, shape, residual=False)
    want = [ref_q.tolist(), _bits(ref_out), _bits(ref_ro)]
    assert want[0] == _want_codes(ref_out)
    for plain, inplace, op, op_none in run_threads(2, body):
        assert plain == inplace == op == want
        assert op_none == [none_q.tolist(), _bits(none_out), _bits(none_ro)]


def _gloo_fp8_rank(rank, init_file, compile_it):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
    try:
        comm = qr.Communicator.from_process_group()
        name = comm.name

        def step(x, res, w, s):
            return torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8(x, res, w, s, EPS, name)

        fn = torch.compile(step, fullgraph=True, backend="aot_eager") if compile_it else step
        x, res, w = (_t(torch.float16, (4, 256), rank), _t(torch.float16, (4, 256), 50),
                     _t(torch.float16, (256,), 60))
        s = torch.tensor([[SCALE]])
        fast = fn(x, res, w, s)
        comm.close()  # the same function now falls back to torch.distributed
        slow = fn(x, res, w, s)
        return ([_codes(fast[0]), _bits(fast[1]), _bits(fast[2])],
                [str(slow[0].dtype), _codes(slow[0]), slow[1].float().tolist(),
                 slow[2].float().tolist(), _want_codes(slow[1])])
    finally:
        dist.destroy_process_group()


@EAGER_AND_COMPILED
def test_fp8_op_falls_back_at_run_time(compile_it):
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _gloo_fp8_rank, os.path.join(d, "init"), compile_it,
                                env={"QR_QUANTIZATION": "FP"}, timeout=240)
    ref_q, ref_out, ref_ro = _ref_fp8(torch.float16, (4, 256))
    for fast, (dtype, codes, norm, ro, want_codes) in results:
        assert fast == [ref_q.tolist(), _bits(ref_out), _bits(ref_ro)]
        # The fallback sums in another order: the same values within fp16
        # roundings, and its quant exactly its own norm's.
        assert dtype == str(QUANT_DTYPE)
        assert torch.allclose(torch.tensor(ro), ref_ro.float(), rtol=2e-3, atol=2e-3)
        assert torch.allclose(torch.tensor(norm), ref_out.float(), rtol=1e-2, atol=1e-2)
        assert codes == want_codes


def test_fallback_quantization_is_e4m3fn_of_every_float16_value():
    """The fallback's quantize (float8_e4m3fn where torch has it, else
    _fused_ops.e4m3_codes) against tests/e4m3.py, for every float16 value
    (infinities, NaNs, subnormals) and scales that saturate and underflow;
    and e4m3_codes alone, which serves torch without float8."""
    norm = torch.from_numpy(np.arange(1 << 16, dtype=np.uint16).view(np.float16).copy())
    for scale in (1.0, 0.1, 1.0 / 448, 3.0, 1e3):
        s = torch.tensor([scale])
        v = norm.float() * (1.0 / s.float())
        want = e4m3.quantize(norm.float().numpy(), scale)
        got = np.array(_codes(_fused_ops.quantize(norm, s)), np.uint8)
        nan = np.isnan(v.numpy())
        # A NaN's sign is the converter's: torch's keeps it (0xFF), ours drops it.
        assert np.array_equal(got[~nan], want[~nan]) and ((got[nan] & 0x7F) == 0x7F).all()
        assert np.array_equal(_fused_ops.e4m3_codes(v).numpy(), want)
