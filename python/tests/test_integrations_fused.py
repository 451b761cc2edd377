"""The adapters' fused all-reduce + residual + RMSNorm (issue 28; its static
FP8 forms, kARResidualRMSNorm(Out)FP8Quant, too) and vLLM's
sequence-parallel reduce-scatter / all-gather (issue 29) against the fakes in
python/tests/fakes, which follow the stacks' own files (each names the
repository, commit and path): vLLM's allreduce_rms_fusion.py (the function
behind torch.ops.vllm.flashinfer_trtllm_fused_allreduce_norm, reading its
flashinfer_comm global), SGLang's flashinfer_comm_fusion.py
(flashinfer_allreduce_residual_rmsnorm, reading _flashinfer_comm), FlashInfer's
comm entry points, CudaCommunicator's reduce_scatter / all_gather, and
SGLang's GroupCoordinator reduce_scatter_tensor / all_gather_into_tensor. Ranks
are processes on gloo; quickreduce runs on its host backend with CPU tensors.
What quickreduce serves must be bit-equal to Communicator's own call; what it
declines must reach the stack's path unchanged; a served path leaves the
bypass warning."""

import logging
import os
import sys
import tempfile

import pytest

torch = pytest.importorskip("torch")

from harness import run_processes  # noqa: E402

FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakes")
EPS = 1e-6


def _gloo(rank, init_file):
    sys.path.insert(0, FAKES)
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
    return dist


def _inputs(rank, tokens, hidden, seed=0):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    x = (torch.randn(tokens, hidden, generator=g) * 0.5).to(torch.float16)
    g2 = torch.Generator().manual_seed(seed)  # the same residual and weight on every rank
    r = torch.randn(tokens, hidden, generator=g2).to(torch.float16)
    w = (1 + 0.1 * torch.randn(hidden, generator=g2)).to(torch.float16)
    return x, r, w


def _vllm_fusion(dist, **passes):
    """vLLM's TP communicator with quickreduce registered, under PassConfig
    `passes`, then the fusion pass's module, imported after the group exists
    (as vLLM does when it compiles: the hook patches it on import), its
    workspace made. Returns (vLLM's communicator, flashinfer.comm, the pass's
    module)."""
    from quickreduce.integrations import vllm as qr_vllm
    from vllm.config import CompilationConfig, PassConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
    qr_vllm.register()
    w = dist.group.WORLD
    with set_current_vllm_config(VllmConfig(CompilationConfig(PassConfig(**passes)))):
        tp = CudaCommunicator(w, torch.device("cpu"), device_group=w, unique_name="tp:0")
    import flashinfer.comm as fi
    from vllm.compilation.passes.fusion import allreduce_rms_fusion as f
    f.init_workspace(2)
    return tp, fi, f


def _vllm_rank(rank, init_file):
    dist = _gloo(rank, init_file)
    try:
        from vllm.logger import RECORDS
        tp, fi, f = _vllm_fusion(dist, fuse_allreduce_rms=True, enable_sp=True,
                                 fuse_gemm_comms=True)
        comm = tp.qr_comm.comm
        pat = fi.AllReduceFusionPattern.kARResidualRMSNorm
        out = {"warnings": [m for _, m in RECORDS if "around it" in m]}
        # AllReduceFusedAddRMSNormPattern: norm_out None, in place.
        x, r, g = _inputs(rank, 256, 1024)
        want_n, want_r = comm.all_reduce_residual_rmsnorm(x.clone(), r.clone(), g, EPS)
        before = len(fi.CALLS)
        f.call_trtllm_fused_allreduce_norm(x, r, g, EPS, 2, True, True, 256, pat)
        out["inplace"] = (torch.equal(x, want_n), torch.equal(r, want_r), len(fi.CALLS) - before)
        # AllReduceRMSNormPattern: a zero residual, norm_out given,
        # residual_out = allreduce_in (the all-reduced input).
        x, _, g = _inputs(rank, 256, 1024, seed=1)
        zero = torch.zeros_like(x)
        want_n, want_r = comm.all_reduce_residual_rmsnorm(x.clone(), zero.clone(), g, EPS)
        norm = torch.empty_like(x)
        f.call_trtllm_fused_allreduce_norm(x, zero, g, EPS, 2, True, True, 256, pat,
                                           norm_out=norm)
        out["norm_out"] = (torch.equal(norm, want_n), torch.equal(x, want_r),
                           len(fi.CALLS) - before)
        # Outside eligibility: rows of 1004 halves are not 16-byte rows, and
        # float32 is not quickreduce's: FlashInfer runs them.
        for shape, dtype in (((64, 1004), torch.float16), ((64, 1024), torch.float32)):
            x = torch.full(shape, float(rank + 1), dtype=dtype)
            r = torch.ones(shape, dtype=dtype)
            g = torch.ones(shape[1], dtype=dtype)
            f.call_trtllm_fused_allreduce_norm(x, r, g, EPS, 2, True, True, 64, pat)
            out.setdefault("fallback", []).append(
                (len(fi.CALLS) - before, r[0, 0].item(), round(x[0, 0].item(), 3)))
        # Sequence parallelism: reduce_scatter / all_gather along dim 0.
        x = _inputs(rank, 512, 1024, seed=2)[0]
        want = comm.reduce_scatter(x.clone())
        got = tp.reduce_scatter(x, dim=0)
        out["rs"] = (tp.taken_by_rsag, torch.equal(got, want), tuple(got.shape))
        shard = torch.full((256, 1024), float(rank + 1), dtype=torch.bfloat16)
        gathered = tp.all_gather(shard, dim=0)
        out["ag"] = (tp.taken_by_rsag, tuple(gathered.shape), gathered[0, 0].item(),
                     gathered[-1, 0].item())
        tp.all_gather(shard.half(), dim=1)  # (gloo has no bfloat16 under torch 1.13)
        out["ag_dim1"] = tp.taken_by_rsag
        tp.reduce_scatter(x.float(), dim=0)
        out["rs_fp32"] = tp.taken_by_rsag
        tp.destroy()
        return out
    finally:
        dist.destroy_process_group()


def test_vllm_fused_allreduce_rmsnorm_and_sequence_parallelism_run_through_quickreduce():
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _vllm_rank, os.path.join(d, "init"),
                                env={"QR_VLLM": "1"}, timeout=180)
    for r in results:
        assert r["inplace"] == (True, True, 0)
        assert r["norm_out"] == (True, True, 0)
        # FlashInfer's own kernel: residual_out = 3 + 1, normalized rows of 4s.
        assert r["fallback"] == [(1, 4.0, 1.0), (2, 4.0, 1.0)]
        assert r["rs"] == ("qr", True, (256, 1024))
        assert r["ag"] == ("qr", (512, 1024), 1.0, 2.0)
        assert r["ag_dim1"] == "vllm" and r["rs_fp32"] == "vllm"
        # Served paths leave the warning; async TP still bypasses.
        assert len(r["warnings"]) == 1, r["warnings"]
        text = r["warnings"][0]
        assert "fuse_gemm_comms" in text
        assert "fuse_allreduce_rms" not in text and "enable_sp" not in text


def _codes(t):
    return t.view(torch.uint8)


def _vllm_fp8_rank(rank, init_file):
    dist = _gloo(rank, init_file)
    try:
        tp, fi, f = _vllm_fusion(dist, fuse_allreduce_rms=True)
        comm = tp.qr_comm.comm
        pats = fi.AllReduceFusionPattern
        qdt = getattr(torch, "float8_e4m3fn", torch.uint8)  # Debian's torch 1.13 has none
        scale = torch.tensor([[0.05]])  # vLLM's static scale: [1, 1] float32
        out = {}
        before = len(fi.CALLS)
        # AllReduceFusedAddRMSNormStaticQuantFP8Pattern: norm_out None, so the
        # norm goes over allreduce_in and the residual is updated in place.
        x, r, g = _inputs(rank, 256, 1024)
        wq, wn, wr = comm.all_reduce_residual_rmsnorm_fp8(x.clone(), r.clone(), g, EPS, scale)
        q = torch.empty(x.shape, dtype=qdt)
        f.call_trtllm_fused_allreduce_norm(x, r, g, EPS, 2, True, True, 256,
                                           pats.kARResidualRMSNormFP8Quant, quant_out=q,
                                           scale_factor=scale)
        out["add"] = (torch.equal(_codes(q), _codes(wq)), torch.equal(r, wr), torch.equal(x, wn))
        # AllReduceFusedRMSNormStaticQuantFP8Pattern: a zero residual, a fresh
        # norm_out, residual_out = allreduce_in (the all-reduce).
        x, _, g = _inputs(rank, 256, 1024, seed=1)
        zero = torch.zeros_like(x)
        wq, wn, wr = comm.all_reduce_residual_rmsnorm_fp8(x.clone(), zero.clone(), g, EPS, scale)
        norm, q = torch.empty_like(x), torch.empty(x.shape, dtype=qdt)
        f.call_trtllm_fused_allreduce_norm(x, zero, g, EPS, 2, True, True, 256,
                                           pats.kARResidualRMSNormFP8Quant, norm_out=norm,
                                           quant_out=q, scale_factor=scale)
        out["no_residual"] = (torch.equal(_codes(q), _codes(wq)), torch.equal(x, wr),
                              torch.equal(norm, wn))
        # kARResidualRMSNormOutFP8Quant (norm_out too) through both FlashInfer
        # entry points as the module holds them: the unified allreduce_fusion
        # and the legacy trtllm_allreduce_fusion (vLLM's collective_fusion.py
        # @6a303fe2); kARResidualRMSNormFP8Quant without a norm_out.
        x, r, g = _inputs(rank, 64, 2048, seed=3)
        wq, wn, wr = comm.all_reduce_residual_rmsnorm_fp8(x.clone(), r.clone(), g, EPS, scale)
        got = []
        for entry in ("allreduce_fusion", "trtllm_allreduce_fusion", "no_norm_out"):
            norm, ro, q = torch.empty_like(x), torch.empty_like(x), torch.empty(x.shape,
                                                                                dtype=qdt)
            common = dict(residual_in=r, residual_out=ro, norm_out=norm, quant_out=q,
                          rms_gamma=g, rms_eps=EPS, scale_factor=scale.reshape([1]))
            if entry == "trtllm_allreduce_fusion":
                f.flashinfer_comm.trtllm_allreduce_fusion(
                    allreduce_in=x, world_size=2, world_rank=rank, token_num=64,
                    hidden_dim=2048, workspace_ptrs=None, launch_with_pdl=True,
                    use_oneshot=True, trigger_completion_at_end=True, fp32_acc=True,
                    pattern_code=pats.kARResidualRMSNormOutFP8Quant, allreduce_out=None,
                    scale_out=None, layout_code=None, **common)
            elif entry == "allreduce_fusion":
                f.flashinfer_comm.allreduce_fusion(
                    input=x, workspace=f._FI_WORKSPACE,
                    pattern=pats.kARResidualRMSNormOutFP8Quant, **common)
            else:
                del common["norm_out"]
                f.flashinfer_comm.allreduce_fusion(
                    input=x, workspace=f._FI_WORKSPACE,
                    pattern=pats.kARResidualRMSNormFP8Quant, **common)
                norm = wn
            got.append((torch.equal(_codes(q), _codes(wq)), torch.equal(norm, wn),
                        torch.equal(ro, wr)))
        out["entries"] = got
        out["served"] = len(fi.CALLS) - before
        # FlashInfer's: NVFP4 (AllReduceFusedAddRMSNormStaticQuantNVFP4Pattern's
        # call), a scale of two values, a Python float scale, float32 tensors,
        # a quant_out of the wrong size.
        x, r, g = _inputs(rank, 64, 1024, seed=4)
        q = torch.empty(x.shape, dtype=qdt)
        f.call_trtllm_fused_allreduce_norm(
            x, r, g, EPS, 2, True, True, 64, pats.kARResidualRMSNormFP4Quant,
            quant_out=torch.empty(64, 512, dtype=torch.uint8),
            scale_out=torch.empty(128, 4, dtype=torch.int32), scale_factor=torch.ones(1, 1))
        f.call_trtllm_fused_allreduce_norm(x, r, g, EPS, 2, True, True, 64,
                                           pats.kARResidualRMSNormFP8Quant, quant_out=q,
                                           scale_factor=torch.ones(2))
        f.flashinfer_comm.allreduce_fusion(
            input=x, workspace=f._FI_WORKSPACE, pattern=pats.kARResidualRMSNormOutFP8Quant,
            residual_in=r, residual_out=torch.empty_like(x), norm_out=torch.empty_like(x),
            quant_out=q, rms_gamma=g, rms_eps=EPS, scale_factor=0.05)
        f.call_trtllm_fused_allreduce_norm(x.float(), r.float(), g.float(), EPS, 2, True, True,
                                           64, pats.kARResidualRMSNormFP8Quant, quant_out=q,
                                           scale_factor=scale)
        f.call_trtllm_fused_allreduce_norm(x, r, g, EPS, 2, True, True, 64,
                                           pats.kARResidualRMSNormFP8Quant,
                                           quant_out=q[:32], scale_factor=scale)
        out["flashinfer"] = [p for _, p in fi.CALLS[before:]]
        tp.destroy()
        return out
    finally:
        dist.destroy_process_group()


def test_vllm_fp8_patterns_run_through_quickreduce_and_fp4_through_flashinfer():
    """vLLM's static FP8 fusion (AllReduceFusionPass's FP8 patterns, and
    FlashInfer's kARResidualRMSNormOutFP8Quant through either entry point)
    runs Communicator.all_reduce_residual_rmsnorm_fp8, bit for bit; NVFP4 and
    the FP8 calls quickreduce declines reach FlashInfer."""
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _vllm_fp8_rank, os.path.join(d, "init"),
                                env={"QR_VLLM": "1"}, timeout=180)
    for r in results:
        assert r["add"] == (True, True, True)
        assert r["no_residual"] == (True, True, True)
        assert r["entries"] == [(True, True, True)] * 3
        assert r["served"] == 0
        assert r["flashinfer"] == [3, 2, 4, 2, 2]


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _sglang_rank(rank, init_file):
    dist = _gloo(rank, init_file)
    lines = _Lines()
    log = logging.getLogger("sglang.srt.distributed.quickreduce")
    log.addHandler(lines)
    log.setLevel(logging.INFO)
    try:
        from quickreduce.integrations import sglang as qr_sglang
        import sglang.srt.distributed.parallel_state as ps
        from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler
        set_global_server_args_for_scheduler(ServerArgs(enable_flashinfer_allreduce_fusion=True))
        qr_sglang.patch(ps)
        # The layer module imported before the group exists: patched at once.
        import flashinfer.comm as fi
        from sglang.srt.layers import flashinfer_comm_fusion as f
        tp = ps.GroupCoordinator([[0, 1]], 0, "gloo", False, False, True, False, False, False,
                                 False, group_name="tp")
        comm = tp.qr_comm.comm
        x, r, g = _inputs(rank, 128, 2048)
        want = comm.all_reduce_residual_rmsnorm(x.clone(), r.clone(), g, EPS)
        before = len(fi.CALLS)
        got = f.flashinfer_allreduce_residual_rmsnorm(x, r, g, EPS)
        out = {"fused": (torch.equal(got[0], want[0]), torch.equal(got[1], want[1]),
                         len(fi.CALLS) - before)}
        x = torch.full((8, 1004), float(rank + 1), dtype=torch.float16)
        n, res = f.flashinfer_allreduce_residual_rmsnorm(
            x, torch.ones_like(x), torch.ones(1004, dtype=torch.float16), EPS)
        out["fallback"] = (len(fi.CALLS) - before, res[0, 0].item())
        out["warnings"] = [m for m in lines.lines if "around it" in m]
        # reduce_scatter_tensor and all_gather (DP attention, the
        # vocabulary-parallel logits): quickreduce's where it takes them.
        x = _inputs(rank, 512, 1024, seed=2)[0]
        want = comm.reduce_scatter(x.clone())
        got = torch.empty(256, 1024, dtype=x.dtype)
        tp.reduce_scatter_tensor(got, x)
        out["rs"] = (tp.taken_by_rsag, torch.equal(got, want))
        shard = torch.full((256, 1024), float(rank + 1), dtype=torch.bfloat16)
        gathered = tp.all_gather(shard, dim=0)
        out["ag"] = (tp.taken_by_rsag, tuple(gathered.shape), gathered[0, 0].item(),
                     gathered[-1, 0].item())
        cols = tp.all_gather(torch.full((4, 256), float(rank + 1), dtype=torch.float16), dim=1)
        out["ag_dim1"] = (tp.taken_by_rsag, tuple(cols.shape), cols[0, 0].item(),
                          cols[0, -1].item())
        small = torch.empty(4, 8, dtype=torch.float32)  # float32: SGLang's own
        tp.reduce_scatter_tensor(small, torch.full((8, 8), float(rank + 1)))
        out["rs_fp32"] = (tp.taken_by_rsag, small[0, 0].item())
        out["serves"] = sum("reduce_scatter_tensor" in m for m in lines.lines)
        tp.destroy()
        return out
    finally:
        dist.destroy_process_group()


def test_sglang_flashinfer_fusion_and_collectives_run_through_quickreduce():
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _sglang_rank, os.path.join(d, "init"),
                                env={"QR_SGLANG": "1"}, timeout=180)
    for r in results:
        assert r["fused"] == (True, True, 0)
        assert r["fallback"] == (1, 4.0)
        assert r["warnings"] == []
        assert r["rs"] == ("qr", True)
        assert r["ag"] == ("qr", (512, 1024), 1.0, 2.0)
        # Along dim 1 the gather is still one of dim 0 underneath (SGLang's
        # concat-style all_gather), moved after: quickreduce's.
        assert r["ag_dim1"] == ("qr", (4, 512), 1.0, 2.0)
        assert r["rs_fp32"] == ("sglang", 3.0)
        assert r["serves"] == 1


def test_sequence_parallelism_stays_vllms_where_the_communicator_refuses_it(monkeypatch):
    """A communicator that refuses a reduce-scatter / all-gather (Unsupported,
    raised before anything is sent, so on every rank alike) leaves that call
    and the group's later ones to vLLM, never raises, and remembers. GPU
    communicators are asked as host ones are (their kernels passed on
    hardware: docs/collectives.md "GPU kernels")."""
    from quickreduce.errors import Unsupported
    from quickreduce.integrations import _rsag
    from quickreduce.integrations._backend import QuickReduceBackend

    calls = []

    class Comm:
        device, closed, refuse = None, False, True

        def reduce_scatter(self, x, out=None, regime=None):
            calls.append(("reduce_scatter", self.device))
            if self.refuse:
                raise Unsupported("no kernel")
            return out

        def all_gather(self, x, out=None, regime=None):
            calls.append(("all_gather", self.device))
            return out

    b = object.__new__(QuickReduceBackend)
    b.disabled, b.comm, b.world_size, b.batch_invariant = False, Comm(), 2, False
    monkeypatch.setattr(_rsag._collectives, "should_run", lambda *a, **k: True)

    class Vllm:
        qr_comm = b

        def reduce_scatter(self, input_, dim=-1):
            return "vllm's"

        all_gather = reduce_scatter

    _rsag.install(Vllm)
    x = torch.zeros(4, 8, dtype=torch.float16)
    assert _rsag.supported(b)
    assert Vllm().reduce_scatter(x, 0) == "vllm's"  # refused, then vLLM's own
    assert not _rsag.supported(b) and Vllm().reduce_scatter(x, 0) == "vllm's"
    assert calls == [("reduce_scatter", None)]  # remembered: not asked again
    # A GPU communicator (device 0) that takes the calls serves them.
    b.rsag_unsupported = False
    Comm.device, Comm.refuse = 0, False
    del calls[:]
    vllm = Vllm()
    assert _rsag.supported(b)
    shard = vllm.reduce_scatter(x, 0)
    assert vllm.taken_by_rsag == "qr" and tuple(shard.shape) == (2, 8)
    gathered = vllm.all_gather(x, 0)
    assert vllm.taken_by_rsag == "qr" and tuple(gathered.shape) == (8, 8)
    assert calls == [("reduce_scatter", 0), ("all_gather", 0)]
    # SGLang's (output, input) forms, on the same GPU communicator.
    class Sgl:
        qr_comm = b

        def _reduce_scatter_tensor(self, output, input):
            return "sglang's"

        _all_gather_into_tensor = _reduce_scatter_tensor

    _rsag.install(Sgl, _rsag.SGLANG_METHODS)
    sgl, out = Sgl(), torch.empty(2, 8, dtype=torch.float16)
    assert sgl._reduce_scatter_tensor(out, x) is out and sgl.taken_by_rsag == "qr"
    assert sgl._all_gather_into_tensor(torch.empty(8, 8, dtype=torch.float16), x) is None
    assert sgl.taken_by_rsag == "qr"
    assert calls[2:] == [("reduce_scatter", 0), ("all_gather", 0)]
