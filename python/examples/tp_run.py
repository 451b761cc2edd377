"""Tensor-parallel decoding on quickreduce, and what each codec costs in quality.

One command:

    python3 python/examples/tp_run.py                      # host backend, world size 2
    python3 python/examples/tp_run.py --device cuda        # GPUs (one per rank, or shared under MPS)
    python3 python/examples/tp_run.py --model PATH         # a local Hugging Face Llama/Qwen2 directory

Without --model it writes a seeded random model (config.json + weights, see
tp_decoder.write_random_model) and loads it through the same code path.
It starts one worker process per rank; each joins a quickreduce group per
regime, runs the model with its row-parallel partial sums all-reduced by
`torch.ops.quickreduce.all_reduce`, and saves logits, tokens and a sample of
its all-reduce calls. This process then checks, per regime and dtype
(docs/model-quality.md says why each threshold is what it is):

  * every sampled all-reduce equals the library's host reference of that call
    bit for bit and lies within the codec's error bound;
  * every rank saw the same logits;
  * FP matches the unsharded model within the rounding tensor parallelism causes;
  * each quantized regime's logits error, KL divergence to FP, perplexity on a
    fixed token stream and greedy agreement over the generated tokens stay
    within thresholds derived from the codec's error bound;
  * eager, CUDA-graph and torch.compile decoding give the same tokens (GPUs).

It prints a table, writes results.json to --out, and exits 1 if a check failed.

This file is the command line and the driver (the plan, then the ranks, then
the checks); beside it: tp_worker (one rank's run), tp_variants (CUDA graph,
torch.compile, TorchScript decode steps), tp_launch (the private broker and
the rank processes), tp_analysis (the error model's scales and each regime's
row), tp_checks (the checks against the bounds).
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The package of this source tree, unless one is installed.
sys.path.append(os.path.dirname(HERE))

import tp_analysis  # noqa: E402
import tp_bounds  # noqa: E402
import tp_checks  # noqa: E402
import tp_common  # noqa: E402
import tp_decoder  # noqa: E402
import tp_heldout  # noqa: E402
import tp_launch  # noqa: E402
import tp_worker  # noqa: E402


# ============================================================ the plan


def _random_prompts(vocab, count, seed):
    g = np.random.default_rng(seed)
    return [g.integers(0, vocab, size=int(g.integers(4, 9))).tolist() for _ in range(count)]


@torch.no_grad()
def _sample_stream(config, state, length, seed):
    """A token stream the model itself finds plausible (sampled at temperature
    1 from the fp32 unsharded model), so its perplexity is a meaningful figure."""
    model = tp_decoder.TPDecoder(config, state, dtype=torch.float32, max_len=length)
    g = torch.Generator().manual_seed(seed)
    stream = [int(torch.randint(config.vocab_size, (1,), generator=g))]
    model.reset_cache()
    for i in range(length - 1):
        z = model(torch.tensor([[stream[-1]]]), torch.tensor([i]))[0, -1]
        stream.append(int(torch.multinomial(torch.softmax(z.double(), -1), 1, generator=g)))
    return stream


# ============================================================ the driver


def driver(args):
    import quickreduce as qr  # noqa: F401  (fails early if the package is missing)

    if args.device == "cuda" or args.analysis_device.startswith("cuda"):
        # One fp32-accumulated rounding per matmul and no TF32, as the bounds assume.
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if args.device == "host":
        # The ranks are forked from this process: keep its CPU kernels on one
        # thread until they are (an OpenMP pool does not survive a fork).
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
    out = args.out or tempfile.mkdtemp(prefix="qr-tp-")
    os.makedirs(out, exist_ok=True)
    if args.model:
        model_path = args.model
    else:
        config = tp_decoder.DecoderConfig(**tp_common.PRESETS[args.preset])
        model_path = tp_decoder.write_random_model(os.path.join(out, "model"), config,
                                                   seed=args.seed)
    config = tp_decoder.load_config(model_path)
    state = tp_decoder.load_state_dict(model_path)
    if config.hidden_size % 32:
        tp_checks.log("note: hidden_size is not a multiple of 32; quantization blocks straddle "
                      "tokens and the decode-step bounds are approximate")
    regimes = args.regimes.split(",")
    if args.world_size != 2 and "INT3" in regimes:
        tp_checks.log("note: INT3 runs only at world size 2; left out")
        regimes.remove("INT3")
    if "FP" not in regimes:
        regimes = ["FP"] + regimes  # the quantized regimes are measured against FP
    dtypes = args.dtypes.split(",")
    t0 = time.time()
    heldout = []
    if args.heldout:  # held-out text: its windows, prompts and stream
        heldout, prompts, stream = tp_heldout.plan_parts(
            args.heldout, config, args.heldout_windows, args.heldout_len, args.prompts,
            args.prompt_len, args.stream_len)
    else:
        prompts = _random_prompts(config.vocab_size, args.prompts, args.seed + 1)
        stream = _sample_stream(config, state, args.stream_len, args.seed + 2)
    max_len = max(args.stream_len, max(map(len, prompts)) + args.new_tokens,
                  args.heldout_len if heldout else 0)
    variants = args.decode_variants.split(",")
    plan = {"regimes": regimes, "dtypes": dtypes, "prompts": prompts, "stream": stream,
            "new_tokens": args.new_tokens, "max_len": max_len, "sample_every": args.sample_every,
            "decode_variants": variants, "compile_regimes": args.compile_regimes.split(","),
            "group_prefix": f"tp{os.getpid()}-{int(time.time() * 1000) % 100000}",
            "heldout": heldout}
    if heldout and args.attribution:
        plan["attribution"] = {"regimes": args.attribution.split(","), "dtype": dtypes[0]}
    if heldout and args.layouts:
        plan["layouts"] = args.layouts.split(",")
        bad = sorted(set(plan["layouts"]) - set(tp_heldout.LAYOUTS))
        if bad:
            raise SystemExit(f"--layouts: unknown {', '.join(bad)} (of "
                             f"{', '.join(tp_heldout.LAYOUTS)})")
    with open(os.path.join(out, "plan.json"), "w") as f:
        json.dump(plan, f)

    # ---- the ranks
    # No size floor: every all-reduce of the model goes through quickreduce
    # (the op raises instead of silently falling back).
    os.environ["QR_MIN_SIZE_BYTES_MB"] = "0"
    if args.one_shot_off:
        # Every call two-shot, so each regime's codec really runs (one-shot is
        # exact: below its ceiling, every regime gives FP's bits). The
        # reference below reads it too.
        os.environ["QR_ONE_SHOT_MAX_KB"] = "0"
    workers = tp_launch.run_workers(args, model_path, out)
    t_workers = time.time() - t0
    if args.device == "host":
        torch.set_num_threads(threads)

    # ---- the checks
    checks = tp_checks.Checks()
    ws = args.world_size
    budget = {"memory_bytes": args.analysis_memory_gib and int(args.analysis_memory_gib * 2**30),
              "max_flops": args.analysis_max_tflop * 1e12}
    analysis = tp_analysis.Analysis(config, state, plan, ws, out, args.analysis_device, **budget)
    t_analysis = analysis.seconds
    table = [analysis.check_regime(checks, regime, mode, workers)
             for regime in regimes for mode in dtypes]
    vs_hf = tp_checks.compare_transformers(checks, model_path, config, state, stream,
                                           args.analysis_device, **budget)
    attribution = tp_heldout.attribution_rows(
        out, plan, np.load(os.path.join(out, f"FP-{dtypes[0]}-heldout-logits.npy")),
        heldout) if heldout else []
    unfused = {(r, m): np.load(os.path.join(out, f"{r}-{m}-heldout-logits.npy"))
               for r in regimes for m in dtypes} if plan.get("layouts") else {}
    layouts = tp_heldout.layout_rows(out, plan, heldout, unfused) if unfused else []
    summary = {"model": model_path, "transformers_check": vs_hf, "config": config.to_hf(),
               "world_size": ws,
               "device": args.device, "one_shot_off": args.one_shot_off,
               "prompts": len(prompts), "new_tokens": args.new_tokens,
               "stream_len": len(stream), "k_sigma": tp_bounds.K_SIGMA,
               "message_bytes": {"decode": config.hidden_size * 2,
                                 "prompt_prefill": [len(p) * config.hidden_size * 2 for p in prompts],
                                 "stream_prefill": len(stream) * config.hidden_size * 2},
               "seconds": {"workers": t_workers, "analysis": t_analysis,
                           "total": time.time() - t0},
               "skipped": analysis.skipped,
               "heldout": heldout and {"file": args.heldout, "windows": len(heldout),
                                       "length": args.heldout_len,
                                       "prompt_len": args.prompt_len},
               "table": table, "attribution": attribution, "layouts": layouts,
               "checks": checks.rows, "failed": checks.failed}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(format_table(summary))
    print("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in summary["seconds"].items()))
    print(f"{len(checks.rows) - checks.failed} checks passed, {checks.failed} failed "
          f"(results in {out}/results.json)")
    return 1 if checks.failed else 0


def format_table(summary):
    head = ("| regime | dtype | bit-exact calls | worst err/bound | max abs dlogit | dlogit/bound "
            "| KL (expected; bound) | log ppl (ref; bound on the change) | greedy agreement |")
    lines = [head, "|" + " --- |" * 9]
    nan = float("nan")
    for r in summary["table"]:
        g = lambda k: r.get(k, nan)  # noqa: E731  (bound columns are absent when skipped)
        lines.append(
            f"| {r['regime']} | {r['dtype']} | {r['bit_exact']}/{r['calls_checked']} "
            f"| {r['worst_bound_ratio']:.3f} | {r['max_abs_logit_error']:.3g} "
            f"| {g('logit_error_over_bound'):.3f} "
            f"| {r['kl_mean']:.3g} ({g('kl_expected'):.2g}; {g('kl_bound'):.2g}) "
            f"| {r['log_ppl']:.4f} ({r['log_ppl_ref']:.4f}; {g('log_ppl_bound'):.2g}) "
            f"| {r['greedy_agreement']:.3f} |")
    if summary.get("skipped"):
        lines.append(f"({summary['skipped']})")
    if summary.get("heldout"):
        lines += ["", tp_heldout.format_table(summary)]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a local Hugging Face directory (Llama or Qwen2); "
                    "default: write a seeded random model (--preset)")
    ap.add_argument("--preset", default="tiny", choices=sorted(tp_common.PRESETS))
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--device", default="host", choices=["host", "cuda"])
    ap.add_argument("--regimes", default="FP,INT8,INT6,INT4,INT3")
    ap.add_argument("--dtypes", default="fp16,bf16", help="of " + ",".join(tp_worker.DTYPE_MODES))
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--stream-len", type=int, default=16)
    ap.add_argument("--sample-every", type=int, default=16,
                    help="check every n-th all-reduce of a generation against the reference")
    ap.add_argument("--decode-variants", default="eager",
                    help="eager,graph,compile,compile-aot,trace (graph and compile need --device cuda; "
                    "compile is inductor, compile-aot the aot_eager backend; "
                    "trace is TorchScript)")
    ap.add_argument("--compile-regimes", default="FP,INT4",
                    help="regimes whose decode is also compiled (a compile takes tens of "
                         "seconds)")
    ap.add_argument("--one-shot-off", type=int, default=1,
                    help="1: QR_ONE_SHOT_MAX_KB=0, every call two-shot (default)")
    ap.add_argument("--heldout", metavar="TEXT",
                    help="held-out text of a byte-level model (train_lm.py): its windows are "
                    "evaluated teacher-forced, prompts and stream come from it")
    ap.add_argument("--heldout-windows", type=int, default=16)
    ap.add_argument("--heldout-len", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=32, help="bytes per held-out prompt")
    ap.add_argument("--attribution", default="",
                    help="with --heldout: regimes (e.g. INT4) run once per layer with only that "
                    "layer's two all-reduces quantized (the first dtype)")
    ap.add_argument("--layouts", default="",
                    help="with --heldout: other layouts run on the held-out windows in every "
                         "regime and dtype: fused (each layer boundary one fused all-reduce + "
                         "residual + RMSNorm), vocab (a vocabulary-parallel head, all-gathered "
                         "in FP)")
    ap.add_argument("--analysis-device", default="cpu")
    ap.add_argument("--analysis-memory-gib", type=float,
                    help="the bounds' memory budget (default: half the GPU's free memory, "
                    "4 GiB on a CPU); checks that do not fit are skipped and said so")
    ap.add_argument("--analysis-max-tflop", type=float, default=200,
                    help="skip the logit bound checks when they need more than this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", help="results directory (default: a new temporary one)")
    ap.add_argument("--print-table", metavar="RESULTS_JSON",
                    help="print the table of an earlier run's results.json and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.print_table:
        with open(args.print_table) as f:
            print(format_table(json.load(f)))
        return 0
    if args.worker:
        tp_worker.worker(args)
        return 0
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
