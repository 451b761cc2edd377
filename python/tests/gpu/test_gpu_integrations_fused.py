"""The vLLM adapter's FlashInfer fusion hook on the GPU (python/tests/gpu/
run.sh): the fake vLLM of python/tests/fakes (allreduce_rms_fusion.py's
call_trtllm_fused_allreduce_norm reading its flashinfer_comm global, as
vLLM's op body does) with CUDA tensors; both of the pass's forms (in place,
and norm_out with a zero residual) run quickreduce's GPU fused collective,
bit for bit against Communicator.all_reduce_residual_rmsnorm on the same
inputs, eagerly and replayed in a CUDA graph. Sequence parallelism's
reduce_scatter / all_gather along dimension 0 run quickreduce's GPU
reduce-scatter / all-gather, bit for bit against Communicator's own calls,
and with both paths served no bypass warning is left."""

import multiprocessing as mp
import os
import sys
import tempfile

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import gpu_ranks  # noqa: E402

pytestmark = pytest.mark.gpu
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPS = 1e-6


def _worker(rank, init_file, q):
    try:
        sys.path.insert(0, os.path.join(_TESTS, "fakes"))
        os.environ["QR_VLLM"] = "1"
        import torch.distributed as dist
        from quickreduce.integrations import _rsag, vllm as qr_vllm
        from vllm.config import (CompilationConfig, PassConfig, VllmConfig,
                                 set_current_vllm_config)
        from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
        from vllm.logger import RECORDS
        dev = gpu_ranks.gpus()[rank]
        torch.cuda.set_device(dev)
        device = torch.device("cuda", dev)
        dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                                world_size=2)
        qr_vllm.register()
        w = dist.group.WORLD
        config = VllmConfig(CompilationConfig(PassConfig(fuse_allreduce_rms=True,
                                                         enable_sp=True)))
        with set_current_vllm_config(config):
            tp = CudaCommunicator(w, device, device_group=w, unique_name="tp:0")
        comm = tp.qr_comm.comm
        import flashinfer.comm as fi
        from vllm.compilation.passes.fusion import allreduce_rms_fusion as f
        f.init_workspace(2)
        pat = fi.AllReduceFusionPattern.kARResidualRMSNorm
        out = {"sp_served": _rsag.supported(tp.qr_comm),
               "warnings": [m for _, m in RECORDS if "around it" in m]}
        g = torch.Generator().manual_seed(rank)
        for dtype in (torch.float16, torch.bfloat16):
            x = (torch.randn(128, 4096, generator=g) * 0.5).to(dtype).to(device)
            r = torch.randn(128, 4096, generator=torch.Generator().manual_seed(7)).to(dtype).to(
                device)
            gamma = torch.ones(4096, dtype=dtype, device=device) * 1.25
            want_n, want_r = comm.all_reduce_residual_rmsnorm(x.clone(), r.clone(), gamma, EPS)
            xi, ri = x.clone(), r.clone()
            f.call_trtllm_fused_allreduce_norm(xi, ri, gamma, EPS, 2, True, True, 128, pat)
            zero = torch.zeros_like(x)
            zn, zr = comm.all_reduce_residual_rmsnorm(x.clone(), zero.clone(), gamma, EPS)
            xn, norm = x.clone(), torch.empty_like(x)
            f.call_trtllm_fused_allreduce_norm(xn, zero, gamma, EPS, 2, True, True, 128, pat,
                                               norm_out=norm)
            # The in-place form captured in a CUDA graph and replayed.
            xg, rg = x.clone(), r.clone()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.stream(stream), torch.cuda.graph(graph):
                f.call_trtllm_fused_allreduce_norm(xg, rg, gamma, EPS, 2, True, True, 128, pat)
            xg.copy_(x)
            rg.copy_(r)
            graph.replay()
            torch.cuda.synchronize()
            out[str(dtype)] = (torch.equal(xi, want_n), torch.equal(ri, want_r),
                               torch.equal(norm, zn), torch.equal(xn, zr),
                               torch.equal(xg, want_n), torch.equal(rg, want_r), len(fi.CALLS))
            # Sequence parallelism (the configured regime, and FP for the
            # gather) against Communicator's calls on the same inputs.
            tp.taken_by_rsag = None
            got = tp.reduce_scatter(x, dim=0)
            rs = (tp.taken_by_rsag, tuple(got.shape), torch.equal(got, comm.reduce_scatter(x)))
            tp.taken_by_rsag = None
            gathered = tp.all_gather(got, dim=0)
            ag = (tp.taken_by_rsag, tuple(gathered.shape),
                  torch.equal(gathered, comm.all_gather(got, regime="FP")),
                  torch.equal(gathered[rank * 64:(rank + 1) * 64], got))
            torch.cuda.synchronize()
            out["sp " + str(dtype)] = (rs, ag)
        tp.destroy()
        dist.destroy_process_group()
        q.put((rank, True, out))
    except BaseException as e:
        import traceback
        q.put((rank, False, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())))


def test_vllm_flashinfer_fusion_runs_quickreduces_gpu_fused_collective():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        procs = [ctx.Process(target=_worker, args=(r, os.path.join(d, "init"), q))
                 for r in range(2)]
        for p in procs:
            p.start()
        got = [q.get(timeout=600) for _ in procs]
        for p in procs:
            p.join(30)
    errors = [v for _, ok, v in got if not ok]
    assert not errors, "\n".join(errors)
    for _, _, r in got:
        for dtype in ("torch.float16", "torch.bfloat16"):
            assert r[dtype] == (True,) * 6 + (0,), (dtype, r[dtype])
            assert r["sp " + dtype] == (("qr", (64, 4096), True),
                                        ("qr", (128, 4096), True, True)), r["sp " + dtype]
        assert r["sp_served"] is True
        assert r["warnings"] == [], r["warnings"]  # both paths served
