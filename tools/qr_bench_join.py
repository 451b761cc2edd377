#!/usr/bin/env python3
"""Joins qr-bench's rows with PyTorch's symmetric-memory rows into one table.

    tools/qr_bench_join.py bench.csv symm.csv [--mode graph] [--out table.md]

bench.csv is qr-bench's --csv (or its --json); symm.csv is
python/bench/symm_mem_bench.py's --csv. The two join by (mode, dtype, bytes);
bf16cast rows take torch's bf16 numbers (the same data type on the wire for
torch; qr-bench likewise reuses bf16's NCCL number). Prints markdown: per cell
(size, dtype, regime; the policy's pick, as qr-bench's policy rows)
quickreduce's µs, NCCL's µs (qr-bench's, same run), each torch op's µs (or
refused / failed / wrong), quickreduce over NCCL, quickreduce over the best
torch op, % of link limit, and the goal-table verdict; then the verdict
counts, what torch refused, and NCCL as timed by each program (torch-nccl
over qr-bench's NCCL: how far the two timing harnesses agree).

The goal table (issue 18; graph-captured, world size 2, quickreduce's time
over NCCL's, for the regime asked for):
  <= 256 KiB       FP <= 0.40, and every codec = FP (the same <= 0.40: small
                   messages run FP whatever the regime)
  1 - 4 MiB        FP, INT8, INT6 <= 0.40; INT4, INT3 <= 0.35
  64 and 256 MiB   FP <= 0.85, INT8 <= 0.50, INT6 <= 0.40, INT4 <= 0.25, INT3 <= 0.21
  every size >= 64 MiB: every codec >= 90 % of its own link limit
Other sizes, eager mode and other world sizes have no goal ("-").

No torch, no matplotlib: pure standard library (CI runs its tests without
either). tools/qr_bench_plot.py --symm draws the same torch rows.
"""
import argparse
import csv
import json
import os
import sys

KIB = 1 << 10
MIB = 1 << 20
REGIMES = ["FP", "INT8", "INT6", "INT4", "INT3"]
# The torch ops a table column can show, in column order, with short names.
TORCH_OPS = [("torch-one-shot", "1-shot"), ("torch-two-shot", "2-shot"),
             ("torch-one-shot-copy", "1-shot-copy")]
TORCH_NCCL = "torch-nccl"
# qr-bench CSV columns the join reads (tools/bench_report.cc CsvHeader).
BENCH_COLUMNS = ["bytes", "dtype", "mode", "algo", "regime", "us", "nccl_us", "ratio_vs_nccl",
                 "pct_of_link_limit", "policy_choice"]
SYMM_COLUMNS = ["bytes", "dtype", "mode", "op", "status", "us", "detail"]
SMALL_MAX = 256 * KIB
MID = (1 * MIB, 4 * MIB)
LARGE = (64 * MIB, 256 * MIB)
LINK_FROM = 64 * MIB
LINK_MIN_PCT = 90.0
RATIO_SMALL = 0.40
RATIO_MID = {"FP": 0.40, "INT8": 0.40, "INT6": 0.40, "INT4": 0.35, "INT3": 0.35}
RATIO_LARGE = {"FP": 0.85, "INT8": 0.50, "INT6": 0.40, "INT4": 0.25, "INT3": 0.21}


class InputError(Exception):
    """An input file that cannot be read as what it should be."""


def size_label(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d%s" % (b >> shift, unit)
    return str(b)


def _num(v):
    if v is None or v == "":
        return None
    return float(v)


def _read_csv(path, need):
    try:
        with open(path, newline="") as f:
            r = csv.DictReader(f)
            missing = [c for c in need if c not in (r.fieldnames or [])]
            if missing:
                raise InputError("%s: no column %s (is it the right file?)" %
                                 (path, ", ".join(missing)))
            return list(r)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e))


def read_bench(path):
    """qr-bench's rows from its CSV or JSON, numbers parsed (None = unknown),
    and the world size when the file says it (JSON), else None."""
    ws = None
    if path.endswith(".json"):
        try:
            with open(path) as f:
                report = json.load(f)
            raw = report["rows"]
            ws = report.get("header", {}).get("world_size")
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputError("cannot read %s as qr-bench JSON: %s" % (path, e))
    else:
        raw = _read_csv(path, BENCH_COLUMNS)
    rows = []
    for r in raw:
        try:
            rows.append({
                "bytes": int(r["bytes"]), "dtype": r["dtype"], "mode": r["mode"],
                "algo": r["algo"], "regime": r["regime"], "us": _num(r["us"]),
                "nccl_us": _num(r.get("nccl_us")), "ratio_vs_nccl": _num(r.get("ratio_vs_nccl")),
                "pct_of_link_limit": _num(r.get("pct_of_link_limit")),
                "policy_choice": r.get("policy_choice") or "",
            })
        except (KeyError, ValueError, TypeError) as e:
            raise InputError("%s: a row that is not qr-bench's: %s (%s)" % (path, r, e))
    return rows, ws


def read_symm(path):
    """symm_mem_bench.py's rows: {(mode, dtype, bytes): {op: row}}."""
    out = {}
    for r in _read_csv(path, SYMM_COLUMNS):
        try:
            row = {"status": r["status"], "us": _num(r["us"]), "detail": r.get("detail") or ""}
            key = (r["mode"], r["dtype"], int(r["bytes"]))
        except (KeyError, ValueError) as e:
            raise InputError("%s: a row that is not symm_mem_bench's: %s (%s)" % (path, r, e))
        if row["status"] == "ok" and not (row["us"] and row["us"] > 0):
            raise InputError("%s: an ok row without a time: %s" % (path, r))
        out.setdefault(key, {})[r["op"]] = row
    return out


def torch_dtype(dtype):
    """The torch rows a qr-bench dtype is compared with."""
    return "bf16" if dtype == "bf16cast" else dtype


def goal(nbytes, regime, mode="graph", world_size=2):
    """The goal for one cell: (max ratio to NCCL or None, min % of link or
    None, label), or None where the table sets none."""
    if mode != "graph" or world_size != 2 or regime not in REGIMES:
        return None
    ratio = None
    if nbytes <= SMALL_MAX:
        ratio = RATIO_SMALL
    elif MID[0] <= nbytes <= MID[1]:
        ratio = RATIO_MID[regime]
    elif nbytes in LARGE:
        ratio = RATIO_LARGE[regime]
    link = LINK_MIN_PCT if nbytes >= LINK_FROM else None
    if ratio is None and link is None:
        return None
    parts = []
    if ratio is not None:
        parts.append("<= %.2f" % ratio + (" (= FP)" if nbytes <= SMALL_MAX and regime != "FP"
                                          else ""))
    if link is not None:
        parts.append("link >= %.0f %%" % link)
    return ratio, link, ", ".join(parts)


def verdict(g, ratio, link_pct):
    """'pass', 'FAIL: ...' or 'no data: ...' for a cell with goal g; the second
    value is True, False or None (no data)."""
    max_ratio, min_link, _ = g
    fails, unknown = [], []
    if max_ratio is not None:
        if ratio is None:
            unknown.append("no NCCL")
        elif not ratio <= max_ratio + 1e-9:
            fails.append("%.2f > %.2f" % (ratio, max_ratio))
    if min_link is not None:
        if link_pct is None:
            unknown.append("no link limit")
        elif not link_pct >= min_link - 1e-9:
            fails.append("link %.0f %% < %.0f %%" % (link_pct, min_link))
    if fails:
        return "FAIL: " + "; ".join(fails), False
    if unknown:
        return "no data: " + ", ".join(unknown), None
    return "pass", True


def _torch_cell(row):
    if row is None:
        return "-"
    if row["status"] == "ok":
        return "%.1f" % row["us"]
    return row["status"]


def join(bench_rows, symm, mode="graph", world_size=2):
    """One dict per policy row of qr-bench in `mode`, in qr-bench's order, with
    the torch numbers, ratios and verdict."""
    out = []
    for r in bench_rows:
        if r["mode"] != mode or r["algo"] != "policy":
            continue
        t = symm.get((mode, torch_dtype(r["dtype"]), r["bytes"]), {})
        best = None
        for op, short in TORCH_OPS:
            tr = t.get(op)
            if tr and tr["status"] == "ok" and (best is None or tr["us"] < best[1]):
                best = (short, tr["us"])
        ratio = r["ratio_vs_nccl"]
        if ratio is None and r["nccl_us"]:
            ratio = r["us"] / r["nccl_us"]
        g = goal(r["bytes"], r["regime"], mode, world_size)
        v, ok = verdict(g, ratio, r["pct_of_link_limit"]) if g else ("-", None)
        out.append({
            "bytes": r["bytes"], "dtype": r["dtype"], "regime": r["regime"],
            "pick": r["policy_choice"] or "-", "us": r["us"], "nccl_us": r["nccl_us"],
            "torch": {op: t.get(op) for op, _ in TORCH_OPS},
            "ratio_nccl": ratio,
            "ratio_torch": (r["us"] / best[1]) if best else None,
            "best_torch": best[0] if best else None,
            "link_pct": r["pct_of_link_limit"],
            "goal": g[2] if g else "-", "verdict": v, "passed": ok, "has_goal": g is not None,
        })
    return out


def _f(v, fmt="%.1f"):
    return "-" if v is None else fmt % v


def render(joined, symm, bench_rows, mode, world_size, sources):
    """The markdown report."""
    ops = [(op, short) for op, short in TORCH_OPS if any(op in v for v in symm.values())]
    lines = ["quickreduce (qr-bench %s) against NCCL and PyTorch symmetric memory (%s), %s mode, "
             "world size %s; µs per all-reduce, the policy's pick per regime." %
             (sources[0], sources[1], mode, world_size if world_size else "?"), ""]
    head = ["size", "dtype", "regime", "pick", "QR µs", "NCCL µs"]
    head += ["torch %s µs" % short for _, short in ops]
    head += ["QR/NCCL", "QR/torch best", "link %", "goal", "verdict"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for j in joined:
        cells = [size_label(j["bytes"]), j["dtype"], j["regime"], j["pick"], _f(j["us"]),
                 _f(j["nccl_us"])]
        cells += [_torch_cell(j["torch"].get(op)) for op, _ in ops]
        rt = "-" if j["ratio_torch"] is None else "%.2f (%s)" % (j["ratio_torch"], j["best_torch"])
        cells += [_f(j["ratio_nccl"], "%.2f"), rt, _f(j["link_pct"], "%.0f"), j["goal"],
                  j["verdict"]]
        lines.append("| " + " | ".join(cells) + " |")
    if any(j["dtype"] == "bf16cast" for j in joined):
        lines += ["", "bf16cast rows show torch's bf16 numbers (torch has no cast)."]
    with_goal = [j for j in joined if j["has_goal"]]
    passed = sum(1 for j in with_goal if j["passed"] is True)
    failed = [j for j in with_goal if j["passed"] is False]
    unknown = sum(1 for j in with_goal if j["passed"] is None)
    lines += ["", "Goal verdicts: %d cells with a goal: %d pass, %d fail, %d without data." %
              (len(with_goal), passed, len(failed), unknown)]
    for j in failed:
        lines.append("- %s %s %s: %s" % (size_label(j["bytes"]), j["dtype"], j["regime"],
                                         j["verdict"]))
    refused = {}
    for (m, d, b), per_op in sorted(symm.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        for op, row in per_op.items():
            if m == mode and row["status"] != "ok":
                refused.setdefault((op, d, row["status"]), []).append((b, row["detail"]))
    if refused:
        lines += ["", "Not timed by torch:"]
        for (op, d, status), items in sorted(refused.items()):
            lines.append("- %s %s %s at %s: %s" % (op, d, status,
                                                    ", ".join(size_label(b) for b, _ in items),
                                                    items[0][1] or "(no message)"))
    calib = calibration(bench_rows, symm, mode)
    if calib:
        lines += ["", "NCCL timed by both programs (torch-nccl over qr-bench's NCCL: how far "
                  "the two harnesses agree):", "",
                  "| size | dtype | qr-bench NCCL µs | torch NCCL µs | ratio |",
                  "|---|---|---|---|---|"]
        for b, d, q, t in calib:
            lines.append("| %s | %s | %.1f | %.1f | %.2f |" % (size_label(b), d, q, t, t / q))
    return "\n".join(lines) + "\n"


def calibration(bench_rows, symm, mode):
    """[(bytes, dtype, qr-bench NCCL us, torch-nccl us)] where both exist."""
    out = []
    for r in bench_rows:
        if r["mode"] != mode or r["algo"] != "nccl" or r["dtype"] == "bf16cast":
            continue
        t = symm.get((mode, r["dtype"], r["bytes"]), {}).get(TORCH_NCCL)
        if t and t["status"] == "ok" and r["us"]:
            out.append((r["bytes"], r["dtype"], r["us"], t["us"]))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", help="qr-bench --csv (or --json) output")
    ap.add_argument("symm", help="python/bench/symm_mem_bench.py --csv output")
    ap.add_argument("--mode", default="graph", choices=["graph", "eager"])
    ap.add_argument("--world-size", type=int, default=None,
                    help="the runs' world size (default: the JSON's, else 2)")
    ap.add_argument("--out", help="write the markdown here (default: stdout)")
    args = ap.parse_args(argv)
    try:
        bench_rows, ws = read_bench(args.bench)
        symm = read_symm(args.symm)
    except InputError as e:
        print("qr_bench_join: %s" % e, file=sys.stderr)
        return 1
    world_size = args.world_size or ws or 2
    joined = join(bench_rows, symm, args.mode, world_size)
    if not joined:
        print("qr_bench_join: no %s-mode policy rows in %s" % (args.mode, args.bench),
              file=sys.stderr)
        return 1
    text = render(joined, symm, bench_rows, args.mode, world_size,
                  (os.path.basename(args.bench), os.path.basename(args.symm)))
    if args.out:
        try:
            with open(args.out, "w") as f:
                f.write(text)
        except OSError as e:
            print("qr_bench_join: cannot write %s: %s" % (args.out, e), file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
