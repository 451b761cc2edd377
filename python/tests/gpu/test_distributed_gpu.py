"""The torch.distributed backend "quickreduce" with CUDA tensors on one node
(two ranks: one per GPU, or both on one GPU under MPS with
QR_ALLOW_SHARED_DEVICE=1, as run.sh sets up): an fp16/bf16 SUM all_reduce,
reduce_scatter_tensor and all_gather_into_tensor run on the node's GPU
communicator, bit for bit the library's reference of the call (FP: the fp32
sum in rank order rounded once; the gather an exact copy), and a spy on
Communicator counts that quickreduce, not the NCCL delegate, ran them;
barriers go through gloo. Ops that go to NCCL are not exercised here: NCCL
refuses two ranks on one GPU (so neither is the hierarchical path, whose
cross-node leg is NCCL's)."""

import os
import tempfile

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import torch.distributed as dist  # noqa: E402

import quickreduce as qr  # noqa: E402
from harness import run_processes  # noqa: E402


def _gpus():
    return [int(g) for g in os.environ.get("QR_TEST_GPUS", "0,1").split(",")]


def _input(rank, n, dtype):
    g = torch.Generator().manual_seed(77 + rank)
    return torch.randn(n, generator=g).to(dtype)


def _rank(rank, path, n):
    import quickreduce.distributed  # noqa: F401
    dev = _gpus()[rank]
    torch.cuda.set_device(dev)
    dist.init_process_group(backend="quickreduce", init_method="file://" + path, rank=rank,
                            world_size=2)
    pg = dist.distributed_c10d._get_default_group()
    out = {}
    for dtype in (torch.float16, torch.bfloat16):
        x = _input(rank, n, dtype).cuda(dev)
        dist.all_reduce(x)
        torch.cuda.synchronize(dev)
        out[str(dtype)] = x.cpu().view(torch.int16).tolist()
    out["joined"] = sorted(k[0] for k in pg._comms)
    dist.barrier()
    pg.close()
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("n", [4096, (8 << 20) // 2 + 8])  # one-shot and two-shot sizes
def test_cuda_all_reduce_through_the_backend(n):
    path = tempfile.mktemp(prefix="qrdist-gpu-")
    results = run_processes(2, _rank, path, n, timeout=300)
    for dtype in (torch.float16, torch.bfloat16):
        ref = qr.reference_all_reduce([_input(r, n, dtype) for r in range(2)])
        for out in results:
            assert out["joined"] == ["cuda"]
            assert out[str(dtype)] == ref.view(torch.int16).tolist()


def _collectives_rank(rank, path, n):
    import quickreduce.distributed  # noqa: F401
    from quickreduce.communicator import Communicator
    ran = []
    for name in ("reduce_scatter", "all_gather"):
        def spy(self, *a, _f=getattr(Communicator, name), _n=name, **kw):
            ran.append((_n, self.device))
            return _f(self, *a, **kw)
        setattr(Communicator, name, spy)
    dev = _gpus()[rank]
    torch.cuda.set_device(dev)
    dist.init_process_group(backend="quickreduce", init_method="file://" + path, rank=rank,
                            world_size=2)
    pg = dist.distributed_c10d._get_default_group()
    rs_fn = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    ag_fn = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
    out = {}
    for dtype in (torch.float16, torch.bfloat16):
        rs = torch.empty(n, dtype=dtype, device=dev)
        rs_fn(rs, _input(rank, 2 * n, dtype).cuda(dev))
        ag = torch.empty(2 * n, dtype=dtype, device=dev)
        ag_fn(ag, _input(10 + rank, n, dtype).cuda(dev))
        torch.cuda.synchronize(dev)
        out[str(dtype)] = (rs.cpu().view(torch.int16).tolist(),
                           ag.cpu().view(torch.int16).tolist())
    out["ran"] = ran
    out["joined"] = sorted(k[0] for k in pg._comms)
    dist.barrier()
    pg.close()
    dist.destroy_process_group()
    return out


# Per rank: a one-shot whole message, and one just above world size 2's 4 MiB
# one-shot ceiling (the two-shot phase kernels).
@pytest.mark.parametrize("n", [4096, (1 << 20) + 8])
def test_cuda_reduce_scatter_and_all_gather_through_the_backend(n):
    path = tempfile.mktemp(prefix="qrdist-gpu-")
    results = run_processes(2, _collectives_rank, path, n, timeout=300,
                            env={"QR_QUANTIZATION": "FP", "QR_MIN_SIZE_BYTES_MB": "0",
                                 "QR_CAST_BF16_TO_FP16": "0"})
    for dtype in (torch.float16, torch.bfloat16):
        total = (_input(0, 2 * n, dtype).float() + _input(1, 2 * n, dtype).float()).to(dtype)
        gathered = torch.cat([_input(10 + r, n, dtype) for r in range(2)])
        for rank, out in enumerate(results):
            rs, ag = out[str(dtype)]
            assert rs == total[rank * n:(rank + 1) * n].view(torch.int16).tolist(), (rank, dtype)
            assert ag == gathered.view(torch.int16).tolist(), (rank, dtype)
    for rank, out in enumerate(results):
        assert out["joined"] == ["cuda"]
        assert out["ran"] == [("reduce_scatter", _gpus()[rank]), ("all_gather", _gpus()[rank])] * 2
