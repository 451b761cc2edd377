"""python/bench/symm_mem_bench.py without a GPU: its flags and plan against
qr-bench's (the defaults and timing constants are read from tools/), the CSV
it writes, and one cell's logic (refused, wrong, failed, timed) over fake
ranks and a fake clock. Where torch is installed, the op schemas the script
calls positionally are checked against torch's (skipped without torch or
without the ops)."""
import importlib.util
import os
import re
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
sys.path.insert(0, _HERE)
import symm_mem_bench as s  # noqa: E402

K, M = 1 << 10, 1 << 20


def _read(*parts):
    with open(os.path.join(_ROOT, *parts)) as f:
        return f.read()


def test_the_script_imports_no_torch_at_module_level():
    src = _read("python", "bench", "symm_mem_bench.py")
    top_level = [l for l in src.splitlines() if re.match(r"(import|from) ", l)]
    assert not [l for l in top_level if "torch" in l]


def test_defaults_are_qr_bench_s():
    opts = _read("tools", "bench_options.cc")
    default = re.search(r'kDefaultSizes = "([^"]+)"', opts).group(1)
    quick = re.search(r'kQuickSizes = "([^"]+)"', opts).group(1)
    assert default == s.DEFAULT_SIZES and quick == s.QUICK_SIZES
    a = s.parse_args([])
    assert a.sizes == [s.parse_size(x) for x in default.split(",")]
    assert a.dtypes == ["fp16", "bf16"] and a.modes == ["graph", "eager"]
    assert a.ops == ["torch-one-shot", "torch-two-shot", "torch-nccl"]
    assert a.eager_max_bytes == 64 * M and a.world_size == 2
    q = s.parse_args(["--quick"])
    assert q.sizes == [s.parse_size(x) for x in quick.split(",")] and q.modes == ["graph"]
    # Explicit flags win over --quick, as in qr-bench.
    q = s.parse_args(["--quick", "--modes", "eager,graph", "--sizes", "1M,4K"])
    assert q.modes == ["graph", "eager"] and q.sizes == [4 * K, M]


def test_timing_constants_are_qr_bench_s():
    plan = _read("tools", "bench_plan.h")
    consts = dict(re.findall(r"inline constexpr \w+ (k\w+) = ([\d.]+);", plan))
    assert float(consts["kBatchTargetMs"]) == s.BATCH_TARGET_MS
    assert int(consts["kTimedBatches"]) == s.TIMED_BATCHES
    assert int(consts["kMinReps"]) == s.MIN_REPS and int(consts["kMaxReps"]) == s.MAX_REPS


@pytest.mark.parametrize("nbytes,calls", [(4 * K, 50), (4 * M, 50), (16 * M, 16), (64 * M, 4),
                                          (256 * M, 2), (1 << 30, 2)])
def test_calls_per_batch(nbytes, calls):
    assert s.calls_per_batch(nbytes) == calls


@pytest.mark.parametrize("ms,reps", [(0.0, 200), (0.05, 200), (0.1, 200), (0.15, 133),
                                     (1.0, 20), (7.0, 3), (100.0, 3)])
def test_reps_for_target(ms, reps):
    assert s.reps_for_target(ms) == reps


def test_median():
    assert s.median([3.0, 1.0, 2.0]) == 2.0
    assert s.median([4.0, 1.0]) == 2.5
    assert s.median([]) == 0.0


@pytest.mark.parametrize("text,err", [("15", "multiple of 16"), ("0", "positive"),
                                      ("5G", "at most 4G"), ("1X", "not a size"),
                                      ("", "not a size")])
def test_bad_sizes(text, err):
    with pytest.raises(s.UsageError, match=err):
        s.parse_size(text)


def test_sizes():
    assert s.parse_size("4K") == 4096 and s.parse_size("1g") == 1 << 30
    assert s.parse_size("48") == 48 and s.parse_size("4G") == 4 << 30
    assert [s.size_label(b) for b in (48, 4096, M, 3 * M, 1 << 30)] == ["48", "4K", "1M", "3M",
                                                                         "1G"]


@pytest.mark.parametrize("argv,err", [
    (["--dtypes", "bf16cast"], "quickreduce's cast"),
    (["--dtypes", "fp32"], "not one of fp16, bf16"),
    (["--ops", "multimem"], "not one of one-shot, two-shot, one-shot-copy, nccl"),
    (["--modes", "eager", "--sizes", "128M"], "nothing would be timed"),
    (["--world-size", "0"], "at least 1"),
    (["--sizes", ","], "empty list"),
    (["--timeout", "0"], "positive"),
    (["--no-such-flag"], "bad flags"),
])
def test_bad_flags(argv, err):
    with pytest.raises(s.UsageError, match=err):
        s.parse_args(argv)


def test_plan_order_and_eager_limit():
    a = s.parse_args(["--sizes", "128M,4K", "--ops", "two-shot,one-shot"])
    cells = s.plan_cells(a)
    # Sizes, then dtypes, then modes, then ops (canonical order); no eager above 64M.
    assert cells[:4] == [(4 * K, "fp16", "graph", "torch-one-shot"),
                         (4 * K, "fp16", "graph", "torch-two-shot"),
                         (4 * K, "fp16", "eager", "torch-one-shot"),
                         (4 * K, "fp16", "eager", "torch-two-shot")]
    assert len(cells) == 8 + 4
    assert not [c for c in cells if c[0] == 128 * M and c[2] == "eager"]
    full = s.plan_cells(s.parse_args([]))
    assert len(full) == (11 * 2 + 9 * 2) * 3  # 9 of the 11 sizes are <= 64M


def test_rows_and_csv(tmp_path):
    row = s.make_row((2 * M, "bf16", "graph", "torch-two-shot"), "ok", us=10.0, calls=50, reps=7)
    assert row["algbw_GBps"] == pytest.approx(2 * M / 10.0 / 1e3)
    bad = s.make_row((4 * K, "fp16", "graph", "torch-one-shot"), "refused",
                     detail="rank 0: NotImplementedError:\n  not for 'Half', at all")
    with pytest.raises(ValueError):
        s.make_row((4 * K, "fp16", "graph", "torch-one-shot"), "skipped")
    p = tmp_path / "x.csv"
    out = s.CsvOut(str(p))
    out.write(row)
    out.write(bad)
    out.close()
    lines = p.read_text().splitlines()
    assert lines[0] == ",".join(s.CSV_COLUMNS)
    assert lines[1] == "2097152,bf16,graph,torch-two-shot,ok,10.000,209.72,50,7,"
    assert lines[2] == ("4096,fp16,graph,torch-one-shot,refused,,,,,"
                        "\"rank 0: NotImplementedError: not for 'Half', at all\"")
    # Appending (rank 0 after the parent wrote the header) adds no second header.
    s.CsvOut(str(p), "a").close()
    assert p.read_text().count("bytes,dtype") == 1


# --- one cell over fakes ----------------------------------------------------


class FakeCoord:
    """Rank 0 of a group whose other ranks answer `others` (one list per gather)."""

    def __init__(self, others=()):
        self.others = list(others)
        self.agreed = []

    def gather(self, item):
        more = self.others.pop(0) if self.others else [("ok", "")]
        return [item] + more

    def agree(self, n):
        self.agreed.append(n)
        return n

    def barrier(self):
        pass


class FakeTimer:
    """Each batch call costs batch_ms of device time."""

    def __init__(self, batch_ms):
        self.batch_ms = batch_ms
        self.batches = 0
        self.syncs = 0

    def count(self):
        self.batches += 1

    def sync(self):
        self.syncs += 1

    def time_ms(self, enqueue):
        before = self.batches
        enqueue()
        return (self.batches - before) * self.batch_ms


class FakeOp:
    def __init__(self, timer, refuse=None, wrong=False, capture_error=None):
        self.timer, self.refuse, self.wrong = timer, refuse, wrong
        self.capture_error = capture_error
        self.calls = 0
        self.released = False
        self.graph = None

    def call(self):
        if self.refuse:
            raise NotImplementedError(self.refuse)
        self.calls += 1

    def check(self):
        return not self.wrong

    def prepare_timing(self):
        pass

    def batch(self, calls, graph):
        if self.capture_error:
            raise RuntimeError(self.capture_error)
        self.graph = graph
        return self.timer.count

    def release(self):
        self.released = True


class FakeImpl:
    def __init__(self, op):
        self.op = op

    def make(self, cell):
        return self.op


def test_a_timed_cell_follows_qr_bench_s_method():
    timer = FakeTimer(batch_ms=0.5)
    op = FakeOp(timer)
    coord = FakeCoord()
    cell = (4 * M, "bf16", "graph", "torch-one-shot")
    row = s.run_cell(cell, FakeImpl(op), coord, timer)
    assert row["status"] == "ok"
    # probe 0.5 ms -> 40 reps; each sample 40 batches x 0.5 ms over 40 x 50 calls.
    assert coord.agreed == [40] and row["reps"] == 40 and row["calls"] == 50
    assert row["us"] == pytest.approx(0.5 * 1000 / 50)
    assert timer.batches == 1 + 1 + 3 * 40  # warm-up, probe, 3 timed
    assert op.graph is True and op.released
    assert op.calls == 1  # the eager try (the fake's check does not call)


def test_eager_cells_are_not_captured():
    timer = FakeTimer(batch_ms=30.0)
    op = FakeOp(timer)
    row = s.run_cell((64 * M, "bf16", "eager", "torch-two-shot"), FakeImpl(op), FakeCoord(), timer)
    assert op.graph is False
    assert row["reps"] == s.MIN_REPS and row["calls"] == 4
    assert row["us"] == pytest.approx(30.0 * 1000 / 4)


def test_a_refused_op_is_recorded_with_its_message():
    timer = FakeTimer(0.5)
    op = FakeOp(timer, refuse='"one_shot_all_reduce" not implemented for \'Half\'')
    row = s.run_cell((4 * K, "fp16", "graph", "torch-one-shot"), FakeImpl(op), FakeCoord(), timer)
    assert row["status"] == "refused" and row["us"] is None
    assert row["detail"] == ("rank 0: NotImplementedError: \"one_shot_all_reduce\" not "
                             "implemented for 'Half'")
    assert timer.batches == 0 and not op.released


def test_a_refusal_on_another_rank_stops_every_rank():
    timer = FakeTimer(0.5)
    coord = FakeCoord(others=[[("refused", "RuntimeError: size")]])
    row = s.run_cell((4 * K, "bf16", "graph", "torch-two-shot"), FakeImpl(FakeOp(timer)), coord,
                     timer)
    assert row["status"] == "refused" and row["detail"] == "rank 1: RuntimeError: size"
    assert timer.batches == 0


def test_a_set_up_error_is_a_failure_not_a_refusal():
    class NoBuffers:
        def make(self, cell):
            raise MemoryError("CUDA out of memory")

    timer = FakeTimer(0.5)
    row = s.run_cell((1 << 30, "bf16", "graph", "torch-one-shot"), NoBuffers(), FakeCoord(), timer)
    assert row["status"] == "failed"
    assert row["detail"] == "rank 0: set-up: MemoryError: CUDA out of memory"
    # Another rank's set-up failure wins over this rank's refusal.
    op = FakeOp(timer, refuse="not implemented for 'Half'")
    coord = FakeCoord(others=[[("failed", "set-up: MemoryError: x")]])
    row = s.run_cell((4 * K, "fp16", "graph", "torch-one-shot"), FakeImpl(op), coord, timer)
    assert row["status"] == "failed" and row["detail"] == "rank 1: set-up: MemoryError: x"


def test_a_wrong_sum_is_not_timed():
    timer = FakeTimer(0.5)
    row = s.run_cell((4 * K, "bf16", "graph", "torch-two-shot"),
                     FakeImpl(FakeOp(timer, wrong=True)), FakeCoord(), timer)
    assert row["status"] == "wrong" and row["detail"].startswith("rank 0: differs")
    assert timer.batches == 0
    coord = FakeCoord(others=[[("ok", "")], [("wrong", "differs from the exact sum")]])
    row = s.run_cell((4 * K, "bf16", "graph", "torch-two-shot"), FakeImpl(FakeOp(timer)), coord,
                     timer)
    assert row["status"] == "wrong" and row["detail"].startswith("rank 1:")


def test_a_failed_capture_is_recorded_and_not_timed():
    timer = FakeTimer(0.5)
    op = FakeOp(timer, capture_error="operation not permitted when stream is capturing")
    row = s.run_cell((4 * K, "bf16", "graph", "torch-nccl"), FakeImpl(op), FakeCoord(), timer)
    assert row["status"] == "failed"
    assert row["detail"] == "rank 0: capture: RuntimeError: operation not permitted when stream " \
        "is capturing"
    assert timer.batches == 0


# --- the command line -------------------------------------------------------


def test_dry_run_prints_the_plan(capsys):
    assert s.main(["--quick", "--ops", "two-shot", "--dry-run"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0] == "4K fp16 graph torch-two-shot calls=50"
    assert len(lines) == 7 * 2
    assert "14 cells, estimated" in out.err


def test_bad_flags_exit_2(capsys):
    assert s.main(["--dtypes", "bf16cast"]) == 2
    assert "quickreduce's cast" in capsys.readouterr().err


def test_an_unwritable_output_exits_2_before_any_gpu_work(tmp_path, capsys):
    assert s.main(["--csv", str(tmp_path / "no" / "such" / "dir.csv")]) == 2
    assert "cannot write an output" in capsys.readouterr().err


def _gpus():
    if importlib.util.find_spec("torch") is None:
        return None
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif((_gpus() or 0) >= 2, reason="two GPUs here: the bench would run")
def test_without_two_gpus_it_says_why_and_leaves_the_csv_header(tmp_path, capsys):
    csv_path = tmp_path / "s.csv"
    assert s.main(["--quick", "--csv", str(csv_path)]) == 1
    err = capsys.readouterr().err
    if _gpus() is None:
        assert "is not installed" in err
    elif _symm_ops() is None:  # a torch before symmetric memory
        assert "torch.distributed._symmetric_memory is not installed" in err
    else:
        assert "needs 2 GPUs" in err
    assert csv_path.read_text() == ",".join(s.CSV_COLUMNS) + "\n"


def _torch_distributed():
    if importlib.util.find_spec("torch") is None:
        return False
    import torch.distributed
    return torch.distributed.is_available() and torch.distributed.is_gloo_available()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_check_pattern_sums_exactly(dtype):
    import torch
    dt = getattr(torch, dtype)
    n = 13 * 40 + 7
    for ws in (2, 4, 8):
        ranks = [s._pattern(torch, n, dt, "cpu", r + 1) for r in range(ws)]
        total = ranks[0].to(torch.float64)
        for t in ranks[1:]:
            total = total + t.to(torch.float64)
            assert torch.equal(total.to(dt).to(torch.float64), total)  # every partial sum exact
        assert torch.equal(total.to(dt), s._pattern(torch, n, dt, "cpu", ws * (ws + 1) // 2))
        assert bool((ranks[0] != 0).any())


def _coord_rank(rank, port, q):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=2)
    try:
        c = s.GlooCoord(torch, dist, dist.new_group(backend="gloo"))
        c.barrier()
        got = c.gather(("ok" if rank == 0 else "refused", "rank %d says" % rank))
        reps = c.agree(40 if rank == 0 else 7)
        q.put((rank, got, reps))
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not _torch_distributed(), reason="no torch.distributed with gloo")
def test_gloo_coord_gathers_and_takes_rank_0_s_count():
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = s._free_port()
    procs = [ctx.Process(target=_coord_rank, args=(r, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict((r, (g, n)) for r, g, n in (q.get(timeout=120) for _ in procs))
    for p in procs:
        p.join(timeout=30)
    want = [("ok", "rank 0 says"), ("refused", "rank 1 says")]
    assert results == {0: (want, 40), 1: (want, 40)}


def _symm_ops():
    if importlib.util.find_spec("torch") is None:
        return None
    import torch
    try:
        ns = torch.ops.symm_mem
        return {name: getattr(ns, name) for name in s.OP_SCHEMAS}
    except (AttributeError, RuntimeError):
        return None


@pytest.mark.skipif(_symm_ops() is None, reason="no torch, or a torch without torch.ops.symm_mem")
def test_op_schemas_match_the_calls():
    import torch
    assert s.schema_problems(torch.ops.symm_mem, list(s.OPS.values())) == []


class _Arg:
    def __init__(self, name):
        self.name = name


class _Op:
    def __init__(self, *names):
        self.default = type("D", (), {"_schema": type("S", (), {
            "arguments": [_Arg(n) for n in names]})})


def test_schema_problems_names_a_missing_op_and_a_different_signature():
    class Ns:
        one_shot_all_reduce_out = _Op("input", "reduce_op", "group_name", "out")
        two_shot_all_reduce_ = _Op("input", "group_name", "reduce_op")

    assert s.schema_problems(Ns, ["torch-one-shot", "torch-nccl"]) == []
    problems = s.schema_problems(Ns, ["torch-one-shot", "torch-two-shot", "torch-one-shot-copy"])
    assert problems[0] == ("torch.ops.symm_mem.two_shot_all_reduce_ takes (input, group_name, "
                           "reduce_op); this script calls it as (input, reduce_op, group_name)")
    assert problems[1].startswith("torch.ops.symm_mem.one_shot_all_reduce_copy_out is missing "
                                  "(AttributeError")
    assert len(problems) == 2
    assert set(s.OP_NAMES) | {"torch-nccl"} == set(s.OPS.values())
