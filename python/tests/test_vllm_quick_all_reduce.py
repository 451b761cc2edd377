"""vLLM's tests/distributed/test_quick_all_reduce.py bodies (vllm_qr_bodies.py)
on quickreduce's host backend, through the vLLM plugin: the fake vLLM's
CudaCommunicator (python/tests/fakes/vllm, which follows
vllm/distributed/device_communicators/cuda_communicator.py) dispatches the
TP all-reduce to the plugin's QuickReduceBackend, and gloo's in-place
all-reduce plays the other backend. Regimes come in through vLLM's own
variable, VLLM_ROCM_QUICK_REDUCE_QUANTIZATION, as vLLM's test sets them.
Here at 1-2 Mi elements with one-shot off (QR_ONE_SHOT_MAX_KB=0), so that
every regime's codec runs and CI's two cores finish in seconds; the GPU run
(gpu/test_gpu_vllm_port.py) uses vLLM's sizes and CUDA graphs.

INT3 misses the tolerance: quickreduce's INT3 scales each 32-value block by
its largest magnitude (docs/codecs.md section 6), so randint(1, 23) data
reduced over two ranks is off by up to ~11.7, against vLLM's 2.5 (its
newest test) or 5.5 (+ 10 %). Marked a strict xfail until the codec
matches: it turns into a failure the day it passes."""

import os
import sys
import tempfile

import pytest

torch = pytest.importorskip("torch")

import vllm_qr_bodies as bodies  # noqa: E402
from harness import run_processes  # noqa: E402

SIZE = 1 << 20  # elements
FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakes")


def _rank(rank, init_file, regime):
    sys.path.insert(0, FAKES)
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
    try:
        from quickreduce.integrations import vllm as qr_vllm
        from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
        qr_vllm.register()
        w = dist.group.WORLD
        tp = CudaCommunicator(w, torch.device("cpu"), device_group=w, unique_name="tp:0")
        fa = tp.qr_comm
        assert fa.comm.config["regime"] == regime

        def tp_all_reduce(x):
            out = tp.all_reduce(x)
            assert tp.taken_by == "qr"
            return out

        def other_all_reduce_(x):  # gloo (torch 1.13) has no bf16 sum: via fp32, exact here
            y = x.float()
            dist.all_reduce(y, group=w)
            x.copy_(y)

        bodies.graph_quickreduce(torch, fa, tp_all_reduce, other_all_reduce_, "cpu",
                                 [SIZE + 8], regime)
        bodies.eager_quickreduce(torch, fa, 2, "cpu", regime, sz=SIZE)
        tp.destroy()
        return True
    finally:
        dist.destroy_process_group()


INT3_MISSES = pytest.mark.xfail(strict=True, raises=Exception,
                                reason="INT3's error exceeds vLLM's tolerance (see above)")


@pytest.mark.parametrize("regime", [pytest.param(r, marks=INT3_MISSES) if r == "INT3" else r
                                    for r in bodies.REGIMES])
def test_vllm_quick_all_reduce_bodies_on_the_host_backend(regime):
    env = {"QR_VLLM": "1", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": regime,
           "QR_ONE_SHOT_MAX_KB": "0"}
    with tempfile.TemporaryDirectory() as d:
        assert run_processes(2, _rank, os.path.join(d, "init"), regime, env=env,
                             timeout=280) == [True, True]
