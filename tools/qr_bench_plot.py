#!/usr/bin/env python3
"""Plots qr-bench's JSON report (qr-bench --json FILE).

One PNG per dtype: top panel, graph-mode time per call against message size
(log-log): the policy's pick for each regime (circles where it is one-shot,
squares where it is two-shot), two-shot FP and one-shot as dashed lines, NCCL
as a thick black line; bottom panel, the same over NCCL (below 1 = faster).
With --symm (python/bench/symm_mem_bench.py's CSV), PyTorch's symmetric-memory
one-shot and two-shot as dash-dotted lines in both panels (bf16cast: torch's
bf16), and what torch refused in the title.

    tools/qr_bench_plot.py bench.json --out-dir plots/   # plots/bench_fp16.png, ...
    tools/qr_bench_plot.py bench.json --symm symm.csv --out-dir plots/

Needs matplotlib (Debian: apt-get install -y python3-matplotlib); exits with
status 2 and says so when it is missing.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qr_bench_join  # noqa: E402  (beside this file; no torch, no matplotlib)

REGIMES = ["FP", "INT8", "INT6", "INT4", "INT3"]
DTYPES = ["fp16", "bf16", "bf16cast"]


def size_label(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d%s" % (b >> shift, unit)
    return str(b)


def series(rows, dtype, mode, algo, regime=None):
    """[(bytes, row)] sorted by size for one line of the plot."""
    out = [
        r for r in rows
        if r["dtype"] == dtype and r["mode"] == mode and r["algo"] == algo
        and (regime is None or r["regime"] == regime)
    ]
    return sorted(((r["bytes"], r) for r in out), key=lambda x: x[0])


TORCH_STYLE = {"torch-one-shot": "tab:brown", "torch-two-shot": "tab:olive",
               "torch-one-shot-copy": "tab:pink"}


def plot_torch(top, bottom, symm, dtype, mode, nccl):
    """The torch symmetric-memory lines (a marker at each timed size, so that a
    single one shows); returns what torch did not time, for the title, and the
    sizes drawn."""
    tdtype = qr_bench_join.torch_dtype(dtype)
    nccl_us = {b: r["us"] for b, r in nccl}
    not_timed = []
    sizes = set()
    for op, short in qr_bench_join.TORCH_OPS:
        cells = sorted((b, per_op[op]) for (m, d, b), per_op in symm.items()
                       if m == mode and d == tdtype and op in per_op)
        if not cells:
            continue
        ok = [(b, r["us"]) for b, r in cells if r["status"] == "ok"]
        bad = sorted({r["status"] for _, r in cells if r["status"] != "ok"})
        if bad:
            not_timed.append("%s %s%s" % (short, "/".join(bad),
                                          "" if ok else " at every size"))
        if not ok:
            continue
        sizes.update(b for b, _ in ok)
        label = "torch symm %s%s" % (short, " (bf16)" if tdtype != dtype else "")
        top.plot([b for b, _ in ok], [u for _, u in ok], color=TORCH_STYLE[op],
                 linestyle="-.", linewidth=2, marker="x", label=label)
        ratio = [(b, u / nccl_us[b]) for b, u in ok if nccl_us.get(b)]
        if ratio:
            bottom.plot([b for b, _ in ratio], [v for _, v in ratio], color=TORCH_STYLE[op],
                        linestyle="-.", linewidth=2, marker="x")
    return not_timed, sizes


def plot_dtype(plt, report, dtype, mode, path, symm=None):
    rows = report["rows"]
    if not any(r["dtype"] == dtype and r["mode"] == mode for r in rows):
        return False
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(9, 9), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    colours = dict(zip(REGIMES, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]))
    nccl = series(rows, dtype, mode, "nccl")
    if nccl:
        xs = [b for b, _ in nccl]
        top.plot(xs, [r["us"] for _, r in nccl], color="black", linewidth=2.5, label="NCCL")
        bottom.axhline(1.0, color="black", linewidth=2.5)
    for regime in REGIMES:
        pol = series(rows, dtype, mode, "policy", regime)
        if not pol:
            continue
        xs = [b for b, _ in pol]
        c = colours[regime]
        top.plot(xs, [r["us"] for _, r in pol], color=c, linewidth=1.2,
                 label="policy %s" % regime)
        for want, marker in (("one-shot", "o"), ("two-shot", "s")):
            pts = [(b, r) for b, r in pol if r.get("policy_choice") == want]
            if pts:
                top.scatter([b for b, _ in pts], [r["us"] for _, r in pts], color=c, marker=marker,
                            s=22, zorder=3)
                ratio = [(b, r["ratio_vs_nccl"]) for b, r in pts if r.get("ratio_vs_nccl")]
                if ratio:
                    bottom.scatter([b for b, _ in ratio], [v for _, v in ratio], color=c,
                                   marker=marker, s=22, zorder=3)
        ratio = [(b, r["ratio_vs_nccl"]) for b, r in pol if r.get("ratio_vs_nccl")]
        if ratio:
            bottom.plot([b for b, _ in ratio], [v for _, v in ratio], color=c, linewidth=1.2)
    for algo, regime, style, label in (("two-shot", "FP", (0, (5, 3)), "two-shot FP"),
                                       ("one-shot", None, (0, (1, 2)), "one-shot")):
        s = series(rows, dtype, mode, algo, regime)
        if s:
            top.plot([b for b, _ in s], [r["us"] for _, r in s], color="grey", linestyle=style,
                     linewidth=1.5, label=label)
    torch_note = ""
    torch_sizes = set()
    if symm:
        not_timed, torch_sizes = plot_torch(top, bottom, symm, dtype, mode, nccl)
        if not_timed:
            torch_note = "\ntorch symm-mem not timed: " + ", ".join(not_timed)
    top.set_xscale("log", base=2)
    top.set_yscale("log")
    top.set_ylabel("us per all-reduce (%s)" % mode)
    h = report.get("header", {})
    gpus = h.get("gpus") or ["?"]
    when = (", " + h["date"]) if h.get("date") else ""
    top.set_title("quickreduce vs NCCL, %s, %d x %s%s\n(markers: o one-shot, s two-shot)%s" %
                  (dtype, h.get("world_size", 0), gpus[0], when, torch_note))
    top.grid(True, which="both", alpha=0.3)
    top.legend(fontsize=8, ncol=2)
    bottom.set_xscale("log", base=2)
    bottom.set_ylabel("time / NCCL time")
    bottom.set_xlabel("message size (bytes)")
    bottom.grid(True, which="both", alpha=0.3)
    sizes = sorted({r["bytes"] for r in rows if r["dtype"] == dtype and r["mode"] == mode} |
                   torch_sizes)
    bottom.set_xticks(sizes)
    bottom.set_xticklabels([size_label(b) for b in sizes], rotation=45)
    bottom.minorticks_off()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="qr-bench --json output")
    ap.add_argument("--out-dir", default=".", help="where the PNGs go (default: .)")
    ap.add_argument("--prefix", default="bench", help="file names: <prefix>_<dtype>.png")
    ap.add_argument("--mode", default="graph", choices=["graph", "eager"])
    ap.add_argument("--symm", help="python/bench/symm_mem_bench.py --csv output: torch's lines")
    args = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("qr_bench_plot: matplotlib is missing; install it with "
              "'apt-get install -y python3-matplotlib' (or pip install matplotlib)",
              file=sys.stderr)
        return 2
    try:
        with open(args.json) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print("qr_bench_plot: cannot read %s: %s" % (args.json, e), file=sys.stderr)
        return 1
    symm = None
    if args.symm:
        try:
            symm = qr_bench_join.read_symm(args.symm)
        except qr_bench_join.InputError as e:
            print("qr_bench_plot: %s" % e, file=sys.stderr)
            return 1
    os.makedirs(args.out_dir, exist_ok=True)
    written = []
    for dtype in DTYPES:
        path = os.path.join(args.out_dir, "%s_%s.png" % (args.prefix, dtype))
        if plot_dtype(plt, report, dtype, args.mode, path, symm):
            written.append(path)
    if not written:
        print("qr_bench_plot: no %s-mode rows in %s" % (args.mode, args.json), file=sys.stderr)
        return 1
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
