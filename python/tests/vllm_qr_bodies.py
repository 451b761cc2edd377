"""The bodies of vLLM's tests/distributed/test_quick_all_reduce.py
(vllm-project/vllm @02c1119c, and the newer stored copy, index id
54528178007, which adds INT3 and asserts eligibility first), without Ray
and without vLLM's process groups: the caller hands in the pieces.

- graph_quickreduce: for 16-20 MiB fp16 and bf16 tensors (vLLM's
  test_sizes: random.Random(44), 8-10 Mi elements, rounded down to a multiple
  of 8), randint(1, 23) and randint(-23, 1) on every rank alike; inside one
  capture, the TP all-reduce (through the stack's dispatch, which must pick
  quick reduce) of each input, each followed by another backend's in-place
  all-reduce of that input; after replay, out == the in-place result within
  atol 2.5, rtol 0.1.
- eager_quickreduce: 16 Mi elements of i % 23, fp16 then bf16, straight
  through qr_comm.quick_all_reduce; out == inp * world size, same tolerance.
INT3's error is wider: atol 5.5 for it.

Used by test_vllm_quick_all_reduce.py (host backend, no capture) and
gpu/test_gpu_vllm_port.py (CUDA graphs, one H200 under MPS or two GPUs).
"""

import random

REGIMES = ["FP", "INT8", "INT6", "INT4", "INT3"]
_rng = random.Random(44)
TEST_SIZES = [_rng.randint(8 * 1024 * 1024, 10 * 1024 * 1024) for _ in range(8)]
TEST_SIZES = [v - v % 8 for v in TEST_SIZES]
EAGER_SIZE = 16 * 1024 * 1024


def tolerance(regime):
    return {"atol": 5.5 if regime == "INT3" else 2.5, "rtol": 0.1}


def _assert_quickreduce(fa, inp):
    assert fa is not None
    assert not fa.disabled
    assert fa.should_quick_allreduce(inp), "quick reduce declines %s x %d" % (inp.dtype,
                                                                            inp.numel())


def graph_quickreduce(torch, fa, tp_all_reduce, other_all_reduce_, device, sizes, regime,
                      capture=None):
    """capture: None runs the four calls eagerly; else a function returning
    (graph, context manager) to capture them in, e.g. a CUDA graph on a side
    stream. Every rank must draw the same inputs: a generator seeded 42."""
    gen = torch.Generator(device=device).manual_seed(42)
    for sz in sizes:
        for dtype in (torch.float16, torch.bfloat16):
            inp1 = torch.randint(1, 23, (sz,), dtype=dtype, device=device, generator=gen)
            inp2 = torch.randint(-23, 1, (sz,), dtype=dtype, device=device, generator=gen)
            _assert_quickreduce(fa, inp1)
            _assert_quickreduce(fa, inp2)
            graph = None
            if capture is None:
                out1 = tp_all_reduce(inp1)
                other_all_reduce_(inp1)
                out2 = tp_all_reduce(inp2)
                other_all_reduce_(inp2)
            else:
                graph, ctx = capture()
                with ctx:
                    out1 = tp_all_reduce(inp1)
                    other_all_reduce_(inp1)
                    out2 = tp_all_reduce(inp2)
                    other_all_reduce_(inp2)
                graph.replay()
                torch.cuda.synchronize()
            torch.testing.assert_close(out1, inp1, **tolerance(regime))
            torch.testing.assert_close(out2, inp2, **tolerance(regime))


def eager_quickreduce(torch, fa, world_size, device, regime, sz=EAGER_SIZE):
    for dtype in (torch.float16, torch.bfloat16):
        inp = (torch.arange(sz, device=device) % 23).to(dtype)
        _assert_quickreduce(fa, inp)
        out = fa.quick_all_reduce(inp)
        torch.testing.assert_close(out, inp * world_size, **tolerance(regime))
