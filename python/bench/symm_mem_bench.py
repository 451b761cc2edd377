#!/usr/bin/env python3
"""PyTorch's symmetric-memory all-reduce timed like qr-bench, for the peer line.

One process per GPU (rank r on GPU r, started with multiprocessing's spawn;
torch.distributed with the NCCL backend, plus a gloo group that the ranks use
to agree on every step outside the timed region). Per cell (size, dtype,
mode, op), in qr-bench's order (sizes ascending, then dtypes, then modes):

  torch-one-shot       torch.ops.symm_mem.one_shot_all_reduce_out(symm, "sum", group, out)
  torch-two-shot       torch.ops.symm_mem.two_shot_all_reduce_(symm, "sum", group), in place
  torch-one-shot-copy  one_shot_all_reduce_copy_out(symm, local, "sum", group, out): the
                       local input is copied into the symmetric buffer first (not a default op)
  torch-nccl           torch.distributed.all_reduce on the NCCL group, in place: the same
                       NCCL as qr-bench's baseline, timed by this program (a calibration)

Never the multimem ops: NVLink multicast stays off (TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NCCL_NVLS_ENABLE=0 and NVSHMEM_DISABLE_NVLS=1 are set for the ranks whatever the
caller's environment says), and the symmetric-memory backend is torch's CUDA one
(TORCH_SYMMMEM=CUDA; --backend).

The timing method is qr-bench's (tools/bench_plan.h): one batch is
clamp(256 MiB / size, 2, 50) calls (graph: one replay of a CUDA graph that
captured them; eager: the calls from Python); a warm-up batch, a probe batch,
then 3 timed batches of clamp(20 ms / probe, 3, 200) batches each, timed with
CUDA events on each rank's stream after a host barrier; the cell's time is
rank 0's median batch / calls, and rank 0's probe sets the repetitions of
every rank. Before timing, each op is called once eagerly: an op that raises
there (a dtype or size torch does not take) is recorded as refused with its
message, on every rank; then once more on known data, checked against the
exact sum (status wrong if it differs). The in-place ops (two-shot, nccl)
are timed on zeros so that repeated sums stay finite; a sum kernel's time
does not depend on the values.

Output: --csv (columns bytes,dtype,mode,op,status,us,algbw_GBps,calls,reps,detail;
status ok, refused, failed or wrong) joins qr-bench's --csv by (mode, dtype,
bytes): tools/qr_bench_join.py prints the comparison table. --json adds a
header (torch, CUDA, GPUs, backend, environment, method, command line, date).

  python3 python/bench/symm_mem_bench.py --csv symm.csv --json symm.json
  python3 python/bench/symm_mem_bench.py --quick --dry-run      # the plan, no GPU

Exit status: 0 every cell ok or refused; 3 some cell failed or was wrong
(outputs written); 1 fatal (too few GPUs, no torch, a rank died or hung past
--timeout); 2 bad flags.
"""

import argparse
import csv
import datetime
import json
import os
import socket
import sys
import time

MIB = 1 << 20
MAX_BYTES = 4 << 30
DEFAULT_SIZES = "4K,16K,64K,256K,1M,2M,4M,16M,64M,256M,1G"
QUICK_SIZES = "4K,64K,256K,1M,4M,16M,64M"
DTYPES = ("fp16", "bf16")
MODES = ("graph", "eager")
# Command-line op names -> the op column of the CSV.
OPS = {
    "one-shot": "torch-one-shot",
    "two-shot": "torch-two-shot",
    "one-shot-copy": "torch-one-shot-copy",
    "nccl": "torch-nccl",
}
DEFAULT_OPS = "one-shot,two-shot,nccl"
# The torch.ops.symm_mem op behind each symmetric-memory op, and the argument
# names its schema must have, in order: the ops are called positionally, so
# the run checks the installed torch's schemas first (schema_problems).
OP_NAMES = {
    "torch-one-shot": "one_shot_all_reduce_out",
    "torch-two-shot": "two_shot_all_reduce_",
    "torch-one-shot-copy": "one_shot_all_reduce_copy_out",
}
OP_SCHEMAS = {
    "one_shot_all_reduce_out": ["input", "reduce_op", "group_name", "out"],
    "two_shot_all_reduce_": ["input", "reduce_op", "group_name"],
    "one_shot_all_reduce_copy_out": ["symm_buffer", "local_input", "reduce_op", "group_name",
                                     "out"],
}
# Multicast and NVLS off, the CUDA symmetric-memory backend: set for the ranks.
FORCED_ENV = {
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NCCL_NVLS_ENABLE": "0",
    "NVSHMEM_DISABLE_NVLS": "1",
}
CSV_COLUMNS = ["bytes", "dtype", "mode", "op", "status", "us", "algbw_GBps", "calls", "reps",
               "detail"]
STATUSES = ("ok", "refused", "failed", "wrong")

# tools/bench_plan.h's timing constants.
BATCH_TARGET_MS = 20.0
TIMED_BATCHES = 3
MIN_REPS = 3
MAX_REPS = 200

TIMING_METHOD = (
    "CUDA events on each rank's current stream after a gloo barrier; rank 0's numbers. One batch "
    "= clamp(256MiB/bytes, 2, 50) calls (graph: one replay of a CUDA graph captured in "
    "thread-local mode; eager: the calls from Python). Warm-up batch, probe batch, then 3 timed "
    "batches of clamp(20 ms / probe, 3, 200) batches each (rank 0's probe sets every rank's "
    "count); us per call = median batch time / calls. One eager call first (an exception there "
    "= refused), one checked call on exact data (a mismatch = wrong). In-place ops (two-shot, "
    "nccl) are timed on zeros.")


class UsageError(Exception):
    """A bad command line (exit status 2)."""


# --- plan (no torch) -------------------------------------------------------


def parse_size(text):
    """'4K', '1M', '1G' or plain bytes -> bytes: a positive multiple of 16, at most 4G."""
    t = text.strip()
    shift = {"K": 10, "M": 20, "G": 30, "T": 40}.get(t[-1:].upper(), 0)
    digits = t[:-1] if shift else t
    if not digits.isdigit():
        raise UsageError("'%s' is not a size (digits with an optional K, M, G or T)" % text)
    b = int(digits) << shift
    if b == 0 or b % 16 or b > MAX_BYTES:
        raise UsageError("%s must be a positive multiple of 16 bytes, at most 4G" % text)
    return b


def size_label(b):
    """qr-bench's compact size: 4K, 1M, 1G, or bytes."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d%s" % (b >> shift, unit)
    return str(b)


def _list(text, flag, allowed=None, parse=None):
    items = [i.strip() for i in text.split(",") if i.strip()]
    if not items:
        raise UsageError("%s: empty list" % flag)
    out = []
    for i in items:
        if allowed is not None and i not in allowed:
            hint = ""
            if flag == "--dtypes" and i == "bf16cast":
                hint = " (bf16cast is quickreduce's cast; the join reuses bf16's numbers for it)"
            raise UsageError("%s: '%s' is not one of %s%s" % (flag, i, ", ".join(allowed), hint))
        out.append(parse(i) if parse else i)
    return out


def _canonical(items, order):
    """Each once, in the canonical order (as qr-bench sorts its lists)."""
    seen = set(items)
    return [o for o in order if o in seen]


def parse_args(argv):
    """The options, with qr-bench's defaults (and --quick's) filled in."""
    ap = argparse.ArgumentParser(
        prog="symm_mem_bench.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", help="message sizes, e.g. 4K,1M,1G (default %s)" % DEFAULT_SIZES)
    ap.add_argument("--dtypes", help="fp16,bf16 (default both)")
    ap.add_argument("--modes", help="graph,eager (default both; --quick: graph)")
    ap.add_argument("--ops", help="one-shot,two-shot,one-shot-copy,nccl (default %s)" %
                    DEFAULT_OPS)
    ap.add_argument("--eager-max-size", default="64M",
                    help="largest size timed eagerly (default 64M)")
    ap.add_argument("--world-size", type=int, default=2,
                    help="ranks, one GPU each (default 2; 1 runs the calls on one GPU, "
                         "times without meaning)")
    ap.add_argument("--backend", default="CUDA",
                    help="symmetric-memory backend, TORCH_SYMMMEM (default CUDA)")
    ap.add_argument("--quick", action="store_true",
                    help="sizes %s, graph only (explicit flags override)" % QUICK_SIZES)
    ap.add_argument("--csv", help="one row per cell")
    ap.add_argument("--json", help="the rows plus a header")
    ap.add_argument("--timeout", type=float, default=540.0,
                    help="seconds before hung ranks are stopped (default 540)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit (no torch)")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        if e.code == 0:
            raise
        raise UsageError("bad flags (see --help)")
    a.sizes = sorted(set(_list(a.sizes or (QUICK_SIZES if a.quick else DEFAULT_SIZES), "--sizes",
                               parse=parse_size)))
    a.dtypes = _canonical(_list(a.dtypes or ",".join(DTYPES), "--dtypes", DTYPES), DTYPES)
    a.modes = _canonical(_list(a.modes or ("graph" if a.quick else "graph,eager"), "--modes",
                               MODES), MODES)
    a.ops = [OPS[o] for o in _canonical(_list(a.ops or DEFAULT_OPS, "--ops", list(OPS)),
                                        list(OPS))]
    a.eager_max_bytes = parse_size(a.eager_max_size)
    # 1 is a group of one on one GPU: no peer traffic, so its times mean
    # nothing, but it runs every torch call the real sweep makes (rendezvous,
    # each op eager and graph-captured), which a one-GPU machine can check.
    if a.world_size < 1:
        raise UsageError("--world-size must be at least 1 (one GPU per rank; 1 only checks "
                         "the torch calls)")
    if a.modes == ["eager"] and a.sizes[0] > a.eager_max_bytes:
        raise UsageError("--modes eager: every size is above --eager-max-size %s, nothing would "
                         "be timed" % size_label(a.eager_max_bytes))
    if a.timeout <= 0:
        raise UsageError("--timeout must be positive")
    return a


def plan_cells(opts):
    """Cells [(bytes, dtype, mode, op)] in run order, as qr-bench's PlanCells."""
    cells = []
    for b in opts.sizes:
        for d in opts.dtypes:
            for m in opts.modes:
                if m == "eager" and b > opts.eager_max_bytes:
                    continue
                for op in opts.ops:
                    cells.append((b, d, m, op))
    return cells


def calls_per_batch(nbytes):
    """All-reduces per batch: min(50, 256 MiB / bytes), at least 2 (bench_plan.h)."""
    return max(2, min(50, (256 * MIB) // max(nbytes, 1)))


def reps_for_target(replay_ms):
    """Batches per timed sample for a probe batch of replay_ms (bench_plan.h)."""
    if not replay_ms > 0:
        return MAX_REPS
    reps = BATCH_TARGET_MS / replay_ms
    if reps >= MAX_REPS:
        return MAX_REPS
    return max(MIN_REPS, int(reps))


def median(samples):
    s = sorted(samples)
    if not s:
        return 0.0
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def estimate_seconds(cells):
    """qr-bench's rough model per cell, plus process start and set-up."""
    total = 20.0
    for b, _, m, _ in cells:
        call_us = 8.0 + b / 300e3 + (5.0 if m == "eager" else 0.0)
        replay_ms = calls_per_batch(b) * call_us / 1e3
        total += (2 + TIMED_BATCHES * reps_for_target(replay_ms)) * replay_ms / 1e3 + 0.05
    return total


# --- rows (no torch) -------------------------------------------------------


def make_row(cell, status, us=None, calls=None, reps=None, detail=""):
    b, d, m, op = cell
    if status not in STATUSES:
        raise ValueError("status %r" % status)
    return {
        "bytes": b, "dtype": d, "mode": m, "op": op, "status": status,
        "us": us, "algbw_GBps": (b / us / 1e3) if us else None,
        "calls": calls, "reps": reps, "detail": " ".join(str(detail).split()),
    }


def csv_line_values(row):
    """The CSV fields of a row; empty where unknown (as qr-bench's CSV)."""
    out = []
    for c in CSV_COLUMNS:
        v = row.get(c)
        if v is None:
            out.append("")
        elif c == "us":
            out.append("%.3f" % v)
        elif c == "algbw_GBps":
            out.append("%.2f" % v)
        else:
            out.append(str(v))
    return out


class CsvOut:
    """The CSV file: header at open (so that a run that dies still leaves it),
    a flushed line per row."""

    def __init__(self, path, mode="w"):
        self.f = open(path, mode, newline="") if path else None
        self.w = csv.writer(self.f, lineterminator="\n") if self.f else None
        if self.w and mode == "w":
            self.w.writerow(CSV_COLUMNS)
            self.f.flush()

    def write(self, row):
        if self.w:
            self.w.writerow(csv_line_values(row))
            self.f.flush()

    def close(self):
        if self.f:
            self.f.close()
            self.f = None


def table_line(row):
    us = "%10.2f" % row["us"] if row["us"] else "%10s" % "-"
    d = (" " + row["detail"][:70]) if row["status"] != "ok" else ""
    return "%-5s %-5s %-6s %-20s %-8s %s%s" % (size_label(row["bytes"]), row["dtype"],
                                               row["mode"], row["op"], row["status"], us, d)


def schema_problems(symm_mem_ops, ops):
    """Where the installed torch's torch.ops.symm_mem (passed in) differs from
    the calls this script makes for `ops`: a list of sentences, empty if none."""
    problems = []
    for op in ops:
        name = OP_NAMES.get(op)
        if name is None:
            continue
        try:
            got = [a.name for a in getattr(symm_mem_ops, name).default._schema.arguments]
        except (AttributeError, RuntimeError) as e:
            problems.append("torch.ops.symm_mem.%s is missing (%s: %s)" %
                            (name, type(e).__name__, e))
            continue
        if got != OP_SCHEMAS[name]:
            problems.append("torch.ops.symm_mem.%s takes (%s); this script calls it as (%s)" %
                            (name, ", ".join(got), ", ".join(OP_SCHEMAS[name])))
    return problems


# --- one cell, over an implementation (fakes in the test) ------------------


def time_batches(timer, batch, calls, agree_reps):
    """qr-bench's TimeBatches: microseconds per call and the repetitions.
    timer.time_ms(enqueue) times enqueue() on this rank; agree_reps(n) returns
    rank 0's n on every rank."""
    batch()  # warm-up
    timer.sync()
    probe_ms = timer.time_ms(batch)
    reps = agree_reps(reps_for_target(probe_ms))

    def many():
        for _ in range(reps):
            batch()

    samples = [timer.time_ms(many) * 1000.0 / (reps * calls) for _ in range(TIMED_BATCHES)]
    return median(samples), reps


def _first_bad(results, bad):
    for rank, (status, msg) in enumerate(results):
        if status in bad:
            return "rank %d: %s" % (rank, msg)
    return ""


def run_cell(cell, impl, coord, timer):
    """One cell's row: refused, wrong, failed or ok with its time. Every rank
    takes the same path (each decision is agreed through coord)."""
    b, _, mode, _ = cell
    calls = calls_per_batch(b)
    op = None
    try:
        op = impl.make(cell)
        op.call()
        timer.sync()
        local = ("ok", "")
    except Exception as e:  # the op's own argument checks: refused (set-up: failed)
        local = ("refused" if op is not None else "failed",
                 "%s%s: %s" % ("" if op is not None else "set-up: ", type(e).__name__, e))
    results = coord.gather(local)
    if any(s != "ok" for s, _ in results):
        status = "failed" if any(s == "failed" for s, _ in results) else "refused"
        return make_row(cell, status, detail=_first_bad(results, (status,)))
    try:
        local = ("ok", "") if op.check() else ("wrong", "differs from the exact sum")
    except Exception as e:
        local = ("failed", "check: %s: %s" % (type(e).__name__, e))
    results = coord.gather(local)
    if any(s != "ok" for s, _ in results):
        status = "failed" if any(s == "failed" for s, _ in results) else "wrong"
        return make_row(cell, status, detail=_first_bad(results, ("failed", "wrong")))
    try:
        op.prepare_timing()
        batch = op.batch(calls, graph=(mode == "graph"))
        local = ("ok", "")
    except Exception as e:
        batch = None
        local = ("failed", "%s: %s: %s" % ("capture" if mode == "graph" else "set-up",
                                          type(e).__name__, e))
    results = coord.gather(local)
    if any(s != "ok" for s, _ in results):
        return make_row(cell, "failed", detail=_first_bad(results, ("failed",)))
    try:
        us, reps = time_batches(timer, batch, calls, coord.agree)
    finally:
        op.release()
    return make_row(cell, "ok", us=us, calls=calls, reps=reps)


# --- torch (imported in the ranks only) ------------------------------------


def _pattern(torch, n, dtype, device, scale):
    """Exact small values: ((i % 13) - 6) / 8 * scale; every partial sum of up
    to 8 ranks is exact in fp16 and bf16."""
    i = torch.arange(n, device=device, dtype=torch.int32)
    return (((i % 13) - 6).to(torch.float32) * (0.125 * scale)).to(dtype)


class TorchOp:
    """One op at one (bytes, dtype) over views of the rank's buffers."""

    def __init__(self, ctx, cell):
        torch = ctx.torch
        b, d, _, op = cell
        self.ctx, self.op = ctx, op
        self.dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[d]
        n = b // 2
        self.n = n
        self.symm = ctx.symm_buf[:b].view(self.dtype)
        self.out = ctx.out_buf[:b].view(self.dtype)
        self.local = ctx.local_buf[:b].view(self.dtype)
        self.graph = None
        rank, ws = ctx.rank, ctx.world_size
        self.mine = _pattern(torch, n, self.dtype, ctx.device, rank + 1)
        self.expected = _pattern(torch, n, self.dtype, ctx.device, ws * (ws + 1) // 2)
        self._fill()

    def _fill(self):
        if self.op == "torch-one-shot-copy":
            self.local.copy_(self.mine)
            self.symm.zero_()
        elif self.op == "torch-nccl":
            self.local.copy_(self.mine)
        else:
            self.symm.copy_(self.mine)

    def call(self):
        sm = self.ctx.torch.ops.symm_mem
        g = self.ctx.group_name
        if self.op == "torch-one-shot":
            sm.one_shot_all_reduce_out(self.symm, "sum", g, self.out)
        elif self.op == "torch-two-shot":
            sm.two_shot_all_reduce_(self.symm, "sum", g)
        elif self.op == "torch-one-shot-copy":
            sm.one_shot_all_reduce_copy_out(self.symm, self.local, "sum", g, self.out)
        elif self.op == "torch-nccl":
            self.ctx.dist.all_reduce(self.local)
        else:
            raise ValueError(self.op)

    def result(self):
        if self.op == "torch-two-shot":
            return self.symm
        if self.op == "torch-nccl":
            return self.local
        return self.out

    def check(self):
        torch = self.ctx.torch
        torch.cuda.synchronize()
        self.ctx.coord.barrier()
        self._fill()
        self.out.zero_()
        torch.cuda.synchronize()
        self.ctx.coord.barrier()  # every rank's input is in place
        self.call()
        torch.cuda.synchronize()
        return bool(torch.equal(self.result(), self.expected))

    def prepare_timing(self):
        torch = self.ctx.torch
        torch.cuda.synchronize()
        self.ctx.coord.barrier()
        if self.op == "torch-two-shot":
            self.symm.zero_()
        elif self.op == "torch-nccl":
            self.local.zero_()
        else:
            self._fill()
        torch.cuda.synchronize()
        self.ctx.coord.barrier()

    def batch(self, calls, graph):
        if not graph:
            def eager():
                for _ in range(calls):
                    self.call()
            return eager
        torch = self.ctx.torch
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            for _ in range(calls):
                self.call()
        torch.cuda.synchronize()
        self.graph = g
        return g.replay

    def release(self):
        self.graph = None


class TorchImpl:
    def __init__(self, ctx):
        self.ctx = ctx

    def make(self, cell):
        return TorchOp(self.ctx, cell)


class GlooCoord:
    """Host-side agreement between the ranks, through a gloo group."""

    def __init__(self, torch, dist, group):
        self.torch, self.dist, self.group = torch, dist, group

    def barrier(self):
        self.dist.barrier(group=self.group)

    def gather(self, item):
        out = [None] * self.dist.get_world_size()
        self.dist.all_gather_object(out, item, group=self.group)
        return out

    def agree(self, n):
        t = self.torch.tensor([int(n)], dtype=self.torch.int64)
        self.dist.broadcast(t, src=0, group=self.group)
        return int(t.item())


class CudaTimer:
    def __init__(self, torch, coord):
        self.torch, self.coord = torch, coord
        self.start = torch.cuda.Event(enable_timing=True)
        self.stop = torch.cuda.Event(enable_timing=True)

    def sync(self):
        self.torch.cuda.synchronize()

    def time_ms(self, enqueue):
        self.torch.cuda.synchronize()
        self.coord.barrier()  # the ranks start together
        self.start.record()
        enqueue()
        self.stop.record()
        self.torch.cuda.synchronize()
        return self.start.elapsed_time(self.stop)


class Ctx:
    pass


def _header(torch, opts, ws):
    gpus = [torch.cuda.get_device_name(i) for i in range(ws)]
    peer = all(torch.cuda.can_device_access_peer(i, j)
               for i in range(ws) for j in range(ws) if i != j)
    nccl = None
    try:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:
        pass
    return {
        "torch": torch.__version__, "cuda": torch.version.cuda, "nccl": nccl, "gpus": gpus,
        "world_size": ws, "peer_access": peer, "backend": opts.backend,
        "env": {k: os.environ.get(k) for k in sorted(list(FORCED_ENV) + ["TORCH_SYMMMEM"])},
        "timing_method": TIMING_METHOD, "command_line": opts.command_line, "date": opts.date,
    }


def rank_main(rank, opts, port, q):
    """One rank: set-up, every cell, and (rank 0) the outputs. Puts
    (rank, exit code, message) on q at the end."""
    try:
        code, msg = _rank(rank, opts, port)
    except Exception as e:  # reported, not a traceback per rank
        import traceback
        traceback.print_exc()
        code, msg = 1, "%s: %s" % (type(e).__name__, e)
    q.put((rank, code, msg))


def _rank(rank, opts, port):
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    ws = opts.world_size
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=ws, device_id=device)
    try:
        gloo = dist.new_group(backend="gloo")
        coord = GlooCoord(torch, dist, gloo)
        ctx = Ctx()
        ctx.torch, ctx.dist, ctx.coord = torch, dist, coord
        ctx.rank, ctx.world_size, ctx.device = rank, ws, device
        ctx.group_name = dist.group.WORLD.group_name
        top = max(opts.sizes)
        ctx.symm_buf = symm_mem.empty(top, dtype=torch.uint8, device=device)
        symm_mem.rendezvous(ctx.symm_buf, ctx.group_name)
        ctx.out_buf = torch.empty(top, dtype=torch.uint8, device=device)
        ctx.local_buf = torch.empty(top, dtype=torch.uint8, device=device)
        timer = CudaTimer(torch, coord)
        impl = TorchImpl(ctx)
        header = None
        out = None
        if rank == 0:
            header = _header(torch, opts, ws)
            if hasattr(symm_mem, "get_backend"):
                try:
                    header["backend_in_use"] = symm_mem.get_backend(device)
                except Exception:
                    pass
            print("symm_mem_bench: torch %s, CUDA %s, NCCL %s, %d x %s, backend %s, peer access %s"
                  % (header["torch"], header["cuda"], header["nccl"], ws, header["gpus"][0],
                     header.get("backend_in_use", opts.backend), header["peer_access"]),
                  file=sys.stderr)
            out = CsvOut(opts.csv, "a")
        cells = plan_cells(opts)
        rows = []
        start = time.monotonic()
        for i, cell in enumerate(cells):
            if rank == 0:
                print("[%d/%d %6.1fs] %s %s %s %s" % (i + 1, len(cells), time.monotonic() - start,
                                                      size_label(cell[0]), cell[1], cell[2],
                                                      cell[3]), file=sys.stderr)
            row = run_cell(cell, impl, coord, timer)
            if rank == 0:
                rows.append(row)
                out.write(row)
                print(table_line(row))
                sys.stdout.flush()
        code = 0 if all(r["status"] in ("ok", "refused") for r in rows) else 3
        if rank == 0:
            out.close()
            header["wall_seconds"] = time.monotonic() - start
            if opts.json:
                with open(opts.json, "w") as f:
                    json.dump({"header": header, "rows": rows}, f, indent=1)
                    f.write("\n")
        # Every rank is done with its peers' buffers before any is freed.
        torch.cuda.synchronize()
        coord.barrier()
        ctx.symm_buf = ctx.out_buf = ctx.local_buf = None
        return code, ""
    finally:
        dist.destroy_process_group()


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(opts):
    """Spawns the ranks and waits; the exit status."""
    import multiprocessing as mp
    try:
        import torch
        import torch.distributed._symmetric_memory  # noqa: F401  (registers what Python adds)
    except ImportError as e:
        print("symm_mem_bench: torch with torch.distributed._symmetric_memory is not installed "
              "(%s)" % e, file=sys.stderr)
        return 1
    problems = schema_problems(torch.ops.symm_mem, opts.ops)
    if problems:
        print("symm_mem_bench: torch %s: %s" % (torch.__version__, "; ".join(problems)),
              file=sys.stderr)
        return 1
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < opts.world_size:
        print("symm_mem_bench: needs %d GPUs (one per rank: symmetric memory maps each rank's "
              "buffer into its peers), found %d" % (opts.world_size, n), file=sys.stderr)
        return 1
    for k, v in FORCED_ENV.items():
        os.environ[k] = v
    os.environ["TORCH_SYMMMEM"] = opts.backend
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=rank_main, args=(r, opts, port, q)) for r in range(opts.world_size)]
    for p in procs:
        p.start()
    results = {}
    deadline = time.monotonic() + opts.timeout
    while len(results) < len(procs) and time.monotonic() < deadline:
        try:
            rank, code, msg = q.get(timeout=1.0)
            results[rank] = (code, msg)
            if code == 1:
                break
        except Exception:
            if any(p.exitcode not in (None, 0) for p in procs):
                break
    for p in procs:
        p.join(timeout=10 if len(results) == len(procs) else 0.1)
    stuck = [p for p in procs if p.is_alive()]
    for p in stuck:
        p.terminate()
    for p in stuck:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    if len(results) < len(procs) or any(c == 1 for c, _ in results.values()):
        why = "; ".join("rank %d: %s" % (r, m) for r, (c, m) in sorted(results.items()) if m)
        missing = [r for r in range(len(procs)) if r not in results]
        if missing:
            why += ("; " if why else "") + (
                "ranks %s gave no result (died or past --timeout %.0f s)" % (missing, opts.timeout))
        print("symm_mem_bench: fatal: %s" % why, file=sys.stderr)
        return 1
    return max(c for c, _ in results.values())


def main(argv):
    try:
        opts = parse_args(argv)
    except UsageError as e:
        print("symm_mem_bench: %s" % e, file=sys.stderr)
        return 2
    opts.command_line = "symm_mem_bench.py " + " ".join(argv)
    opts.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    cells = plan_cells(opts)
    print("symm_mem_bench: %d cells, estimated %.0f s (%s)" % (len(cells), estimate_seconds(cells),
                                                               opts.command_line), file=sys.stderr)
    if opts.dry_run:
        for c in cells:
            print("%s %s %s %s calls=%d" % (size_label(c[0]), c[1], c[2], c[3],
                                            calls_per_batch(c[0])))
        return 0
    # Outputs fail before any GPU work; the CSV header is there even if a rank dies.
    try:
        CsvOut(opts.csv).close()
        if opts.json:
            open(opts.json, "w").close()
    except OSError as e:
        print("symm_mem_bench: cannot write an output: %s" % e, file=sys.stderr)
        return 2
    return run(opts)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
