"""The torch.distributed backend "quickreduce" with CUDA tensors on one node
(two ranks: one per GPU, or both on one GPU under MPS with
QR_ALLOW_SHARED_DEVICE=1, as run.sh sets up): an fp16/bf16 SUM all_reduce
runs on the node's GPU communicator, bit for bit the library's reference of
the call; barriers go through gloo. Ops that go to NCCL are not exercised
here: NCCL refuses two ranks on one GPU."""

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
