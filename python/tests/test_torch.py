"""The torch layer on CPU tensors (host backend): Communicator with torch
tensors bit for bit against the reference, the torch.ops.quickreduce ops with
their fake (meta) implementations, the run-time choice between quickreduce and
the torch.distributed fallback, and torch.compile(fullgraph=True) where this
torch has it (Debian's 1.13 does not; the GPU machine's 2.11 does)."""

import os
import tempfile

import pytest

torch = pytest.importorskip("torch")

import quickreduce as qr  # noqa: E402
import quickreduce.ops  # noqa: E402,F401
from harness import run_processes, run_threads  # noqa: E402

HAS_COMPILE = hasattr(torch, "compile")


def _tensor(dtype, n, rank, seed=7):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return (torch.randn(n, generator=g) * (rank + 1)).to(dtype)


def _bits(t):
    return t.contiguous().view(torch.int16).tolist()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("regime", ["FP", "INT4"])
def test_cpu_tensors_match_the_reference(group_name, dtype, regime):
    n = 40000  # two-shot below this size needs QR_ONE_SHOT_MAX_KB, so both are seen
    def body(rank):
        x = _tensor(dtype, n, rank)
        with qr.Communicator(group_name, rank, 2) as c:
            y = c.all_reduce(x, regime=regime, cast_bf16_to_fp16=False)
            z = x.clone()
            c.all_reduce(z, out=z, regime=regime, cast_bf16_to_fp16=False)
            o = torch.empty_like(x)
            r = c.all_reduce(x, out=o, regime=regime, cast_bf16_to_fp16=False)
            assert r is o
        return _bits(y), _bits(z), _bits(o)
    results = run_threads(2, body)
    ref = qr.reference_all_reduce([_tensor(dtype, n, r) for r in range(2)], regime, False)
    assert isinstance(ref, torch.Tensor) and ref.dtype == dtype
    for per_rank in results:
        for got in per_rank:
            assert got == _bits(ref)


def test_should_all_reduce_refuses_what_it_cannot_take(group_name):
    def body(rank):
        with qr.Communicator(group_name, rank, 2) as c:
            good = torch.zeros(1 << 20, dtype=torch.float16)
            out = {
                "good": c.should_all_reduce(good, regime="FP"),
                "fp32": c.should_all_reduce(good.float(), regime="FP"),
                "strided": c.should_all_reduce(good[::2], regime="FP"),
                "misaligned": c.should_all_reduce(good[1:9], regime="FP"),
                "meta": c.should_all_reduce(torch.empty(64, dtype=torch.float16, device="meta"),
                                            regime="FP"),
            }
            with pytest.raises(qr.InvalidArgument, match="aligned"):
                c.all_reduce(good[1:9], regime="FP")
            with pytest.raises(qr.InvalidArgument, match="contiguous"):
                c.all_reduce(good[::2], regime="FP")
            with pytest.raises(qr.InvalidArgument, match="out is torch.bfloat16|does not match|not float16"):
                c.all_reduce(good[:64], out=torch.zeros(64, dtype=torch.bfloat16), regime="FP")
            c.all_reduce(good[:64], regime="FP")  # still in step
            return out
    r = run_threads(2, body)[0]
    assert r == {"good": True, "fp32": False, "strided": False, "misaligned": False,
                 "meta": False}


def test_ops_are_registered_with_fake_implementations():
    op = torch.ops.quickreduce.all_reduce
    x = torch.empty(4, 8, dtype=torch.bfloat16, device="meta")
    y = op(x, "no-such-group")  # the fake runs, not the kernel: no group needed
    assert y.shape == x.shape and y.dtype == x.dtype and y.device.type == "meta"
    assert torch.ops.quickreduce.all_reduce_(x, "no-such-group") is None
    assert "Tensor(a!)" in str(torch.ops.quickreduce.all_reduce_.default._schema)


def test_op_without_communicator_or_fallback_raises():
    with pytest.raises(qr.InvalidArgument, match="no communicator named"):
        torch.ops.quickreduce.all_reduce(torch.zeros(64, dtype=torch.float16), "nobody-here")


def test_op_refuses_an_ambiguous_name(group_name):
    import threading
    both_open, both_asked = threading.Barrier(2), threading.Barrier(2)

    def body(rank):
        with qr.Communicator(group_name, rank, 2) as c:
            both_open.wait(10)
            with pytest.raises(qr.InvalidArgument, match="2 communicators named"):
                torch.ops.quickreduce.all_reduce(torch.zeros(64, dtype=torch.float16), c.name)
            both_asked.wait(10)
            return c.name
    assert run_threads(2, body) == [group_name] * 2


def test_ops_run_quickreduce(group_name, monkeypatch):
    monkeypatch.setenv("QR_QUANTIZATION", "FP")
    monkeypatch.setenv("QR_MIN_SIZE_BYTES_MB", "0")
    n = 4096
    def body(rank):
        x = _tensor(torch.float16, n, rank)
        # Ranks as threads of one process: each needs a name of its own.
        with qr.Communicator(group_name, rank, 2, name="%s-r%d" % (group_name, rank)) as c:
            y = torch.ops.quickreduce.all_reduce(x, c.name)
            z = x.clone()
            torch.ops.quickreduce.all_reduce_(z, c.name)
        return _bits(y), _bits(z)
    results = run_threads(2, body)
    ref = _bits(qr.reference_all_reduce([_tensor(torch.float16, n, r) for r in range(2)]))
    assert all(got == ref for per_rank in results for got in per_rank)


def _gloo_rank(rank, init_file, compile_it):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
    try:
        comm = qr.Communicator.from_process_group(None)
        assert comm.rank == rank and comm.world_size == 2
        name = comm.group
        used = []
        real = comm.all_reduce
        comm.all_reduce = lambda *a, **k: (used.append("qr"), real(*a, **k))[1]
        real_dist = dist.all_reduce
        def counted(t, *a, **k):
            used.append("dist")
            return real_dist(t, *a, **k)
        dist.all_reduce = counted

        def step(x):
            return torch.ops.quickreduce.all_reduce(x * 2, name) + 1

        fn = torch.compile(step, fullgraph=True, backend="aot_eager") if compile_it else step
        small = torch.full((64,), float(rank + 1), dtype=torch.float16)     # below the floor
        large = torch.full((1 << 19,), float(rank + 1), dtype=torch.float16)  # 1 MiB: at it
        a = fn(small)
        b = fn(large)
        comm.close()  # the same compiled graph now falls back: the choice is made at run time
        c = fn(large)
        dist.all_reduce = real_dist
        return used, a[:4].tolist(), b[:4].tolist(), c[:4].tolist()
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("compile_it", [
    False,
    pytest.param(True, marks=pytest.mark.skipif(not HAS_COMPILE,
                                                reason="torch %s has no torch.compile"
                                                % torch.__version__)),
], ids=["eager", "compiled"])
def test_op_chooses_quickreduce_or_the_fallback_at_run_time(compile_it, monkeypatch):
    env = {"QR_QUANTIZATION": "FP", "QR_MIN_SIZE_BYTES_MB": "1"}
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _gloo_rank, os.path.join(d, "init"), compile_it, env=env,
                                timeout=300)
    for used, a, b, c in results:
        assert used == ["dist", "qr", "dist"]
        assert a == [7.0] * 4   # (1 + 2) * 2 + 1
        assert b == [7.0] * 4
        assert c == [7.0] * 4
