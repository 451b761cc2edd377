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
"""

import argparse
import functools
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The package of this source tree, unless one is installed.
sys.path.append(os.path.dirname(HERE))

import tp_bounds  # noqa: E402
import tp_common  # noqa: E402
import tp_decoder  # noqa: E402

DTYPE_MODES = {  # name -> (torch dtype, cast_bf16_to_fp16)
    "fp16": (torch.float16, False),
    "bf16": (torch.bfloat16, False),
    "bf16cast": (torch.bfloat16, True),
}

PRESETS = tp_common.PRESETS


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ============================================================ the worker


def qr_all_reduce(x, group):
    """The row-parallel sum: the torch.library op over the group's communicator."""
    return torch.ops.quickreduce.all_reduce(x, group)


class RecordingAllReduce:
    """`torch.ops.quickreduce.all_reduce` on one group, saving a sample of
    its calls (input and output bits) for the driver to check."""

    def __init__(self, group, out_dir, rank):
        self.group, self.out_dir, self.rank = group, out_dir, rank
        self.calls = 0
        self.sample = lambda index: False
        self.tag = ""
        self.saved = []

    def __call__(self, x):
        y = qr_all_reduce(x, self.group)
        if self.sample(self.calls):
            name = f"{self.tag}-call{self.calls}-r{self.rank}.npz"
            np.savez(os.path.join(self.out_dir, name),
                     input=x.detach().contiguous().view(torch.int16).cpu().numpy(),
                     output=y.detach().contiguous().view(torch.int16).cpu().numpy())
            self.saved.append(name)
        self.calls += 1
        return y


def _graph_step(model):
    """A decode step captured in a CUDA graph: (token, position) -> logits."""
    dev = model.device
    tok = torch.zeros((1, 1), dtype=torch.long, device=dev)
    pos = torch.zeros((1,), dtype=torch.long, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(2):  # warm-up runs (the caller resets the cache afterwards)
            model(tok, pos)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        out = model(tok, pos)

    def step(token, position):
        tok.copy_(token)
        pos.copy_(position)
        graph.replay()
        return out

    return step


def worker(args):
    import quickreduce as qr  # the package under test; imported only where it runs

    rank, ws = args.rank, args.world_size
    plan = json.load(open(os.path.join(args.out, "plan.json")))
    config = tp_decoder.load_config(args.model)
    state = tp_decoder.load_state_dict(args.model)
    if args.device == "host":
        device, qr_device = "cpu", None
        # The ranks share the machine's cores.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // ws))
    else:
        ordinal = rank % torch.cuda.device_count()
        torch.cuda.set_device(ordinal)
        device, qr_device = f"cuda:{ordinal}", ordinal
        # One fp32-accumulated rounding per matmul, as the bounds assume.
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_tf32 = False
    results = {}
    for regime in plan["regimes"]:
        for mode in plan["dtypes"]:
            dtype, cast = DTYPE_MODES[mode]
            group = f"{plan['group_prefix']}-{regime}-{mode}"
            # The op uses the group's configured regime and cast (read at join).
            os.environ["QR_QUANTIZATION"] = regime
            os.environ["QR_CAST_BF16_TO_FP16"] = "1" if cast else "0"
            start = time.time()
            with qr.Communicator(group, rank, ws, device=qr_device) as comm:
                joined = time.time()
                ar = RecordingAllReduce(group, args.out, rank)
                model = tp_decoder.TPDecoder(config, state, rank, ws, dtype=dtype, device=device,
                                             all_reduce=ar, max_len=plan["max_len"])
                res = results.setdefault(f"{regime}/{mode}", {})
                # The stream: every call sampled (one per row-parallel layer).
                ar.tag, ar.sample = f"{regime}-{mode}-stream", (lambda i: True)
                z = tp_decoder.stream_logits(model, plan["stream"])
                res["stream_digest"] = hashlib.sha256(z.cpu().numpy().tobytes()).hexdigest()
                if rank == 0:
                    np.save(os.path.join(args.out, f"{regime}-{mode}-stream-logits.npy"),
                            z.cpu().numpy())
                every = plan["sample_every"]
                gen = []
                for p, prompt in enumerate(plan["prompts"]):
                    ar.tag = f"{regime}-{mode}-prompt{p}"
                    first = ar.calls
                    ar.sample = lambda i, first=first: i == first or (i - first) % every == 0
                    tokens, logits = tp_decoder.greedy_generate(model, prompt, plan["new_tokens"])
                    gen.append(tokens)
                    if rank == 0:
                        np.save(os.path.join(args.out, f"{regime}-{mode}-prompt{p}-logits.npy"),
                                logits.cpu().numpy())
                res["tokens"] = {"eager": gen}
                res["calls"] = ar.calls
                res["samples"] = ar.saved
                # Graphs and compile see the bare op (no Python side effects).
                model.all_reduce = functools.partial(qr_all_reduce, group=group)
                for variant in plan["decode_variants"]:
                    if variant == "eager" or (variant.startswith("compile")
                                              and regime not in plan["compile_regimes"]):
                        continue
                    if variant == "graph":
                        step = _graph_step(model)
                    elif variant in ("compile", "compile-aot"):
                        # Each group's model is a new object: one compile each.
                        torch._dynamo.config.cache_size_limit = max(
                            64, torch._dynamo.config.cache_size_limit)
                        backend = "inductor" if variant == "compile" else "aot_eager"
                        step = torch.compile(model, fullgraph=True, dynamic=False,
                                             backend=backend)
                    elif variant == "trace":  # TorchScript: what torch 1.13 on a CPU has
                        example = (torch.zeros((1, 1), dtype=torch.long, device=device),
                                   torch.zeros((1,), dtype=torch.long, device=device))
                        with torch.no_grad():
                            step = torch.jit.trace(model, example, check_trace=False)
                    else:
                        raise ValueError(f"unknown decode variant {variant!r}")
                    res["tokens"][variant] = [
                        tp_decoder.greedy_generate(model, prompt, plan["new_tokens"], step)[0]
                        for prompt in plan["prompts"]]
                comm.check()
                res["seconds"] = {"join": joined - start, "run": time.time() - joined}
    with open(os.path.join(args.out, f"worker{rank}.json"), "w") as f:
        json.dump(results, f)


# ============================================================ the driver


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


class Checks:
    def __init__(self):
        self.rows = []
        self.failed = 0

    def add(self, name, ok, detail):
        self.rows.append({"check": name, "ok": bool(ok), "detail": detail})
        if not ok:
            self.failed += 1
            log(f"FAILED {name}: {detail}")


def _check_calls(checks, out, regime, mode, ws, samples):
    """Sampled calls: equal on every rank, equal to the host reference, in the bound."""
    import quickreduce as qr

    dtype, cast = DTYPE_MODES[mode]
    qdtype = "float16" if dtype == torch.float16 else "bfloat16"
    by_call = {}
    for name in samples:
        by_call.setdefault(name.rsplit("-r", 1)[0], []).append(name)
    exact = worst = 0.0
    n = 0
    tdtype = torch.float16 if qdtype == "float16" else torch.bfloat16

    def tensor(a):  # saved bits -> a CPU tensor of the call's dtype
        return torch.from_numpy(np.ascontiguousarray(a).reshape(-1)).view(tdtype)

    for call in sorted(by_call):
        files = [np.load(os.path.join(out, f"{call}-r{r}.npz")) for r in range(ws)]
        inputs = [tensor(f["input"]) for f in files]
        outputs = [tensor(f["output"]) for f in files]
        ref = qr.reference_all_reduce(inputs, regime=regime, cast_bf16_to_fp16=cast)
        same = all(torch.equal(o.view(torch.int16), outputs[0].view(torch.int16))
                   for o in outputs)
        bit_exact = same and torch.equal(ref.view(torch.int16), outputs[0].view(torch.int16))
        ratio, violations = qr.check_bound(inputs, outputs[0], regime=regime,
                                           cast_bf16_to_fp16=cast)
        n += 1
        exact += bit_exact
        worst = max(worst, ratio)
        if not bit_exact or violations:
            checks.add(f"{regime}/{mode} all-reduce {call}", False,
                       f"bit-exact={bit_exact} ranks-equal={same} bound ratio={ratio:.3f} "
                       f"violations={violations}")
    checks.add(f"{regime}/{mode} sampled all-reduces: bit-exact and within bound", exact == n,
               f"{int(exact)}/{n} calls bit-exact, worst error/bound {worst:.3f}")
    return {"calls_checked": n, "bit_exact": int(exact), "worst_bound_ratio": worst}


def _softmax(z):
    return np.exp(tp_bounds.log_softmax(z))


def _stream_metrics(z_ref, z, stream):
    kl = tp_bounds.kl_per_position(z_ref, z)
    return {"max_abs_logit_error": float(np.abs(z - z_ref).max()),
            "kl_mean": float(kl.mean()),
            "log_ppl": tp_bounds.log_perplexity(z, stream),
            "log_ppl_ref": tp_bounds.log_perplexity(z_ref, stream)}


def _greedy_agreement(ref_tokens, tokens):
    """(first position that differs or len, fraction of equal positions)."""
    first = next((i for i, (a, b) in enumerate(zip(ref_tokens, tokens)) if a != b), len(tokens))
    return first, float(np.mean([a == b for a, b in zip(ref_tokens, tokens)]))


# Decode variants that run eager's kernels (a CUDA graph replays them;
# aot_eager traces through dynamo and AOT autograd with the ops' fake
# implementations, then calls the same ops; TorchScript likewise): their tokens
# equal eager's exactly.
EXACT_VARIANTS = ("graph", "compile-aot", "trace")


def _check_greedy(checks, key, ref_name, config, state, modes, pair, prompts, ref_tokens,
                  tokens, ref_logits_at, device):
    """Greedy tokens against a reference run: each prompt's first differing
    token is allowed only where the reference's margin of its token over ours
    is within k*S of the error model's `pair`. ref_logits_at(i, seq, first)
    gives the reference's logits there. Returns (agreements, first divergences)."""
    agree, firsts = [], []
    for i, prompt in enumerate(prompts):
        first, frac = _greedy_agreement(ref_tokens[i], tokens[i])
        agree.append(frac)
        firsts.append(first)
        if first == len(tokens[i]):
            continue
        seq = prompt + ref_tokens[i][:first]
        a, b = ref_tokens[i][first], tokens[i][first]
        s = tp_bounds.Sensitivity(config, state, seq, modes, device=device)
        scale, head_err = s.margin_scale(len(seq) - 1, a, b, [pair])
        limit = tp_bounds.K_SIGMA * float(scale[0]) + head_err
        ref_logits = ref_logits_at(i, seq, first)
        margin = float(ref_logits[a] - ref_logits[b])
        checks.add(f"{key} prompt {i} first differing token {first} allowed", margin <= limit,
                   f"{ref_name} margin {margin:.4g} of token {a} over {b} <= {limit:.4g}")
    return agree, firsts


def _compare_transformers(checks, model_path, config, state, stream, device):
    """Our fp32 model against transformers' own on the stream, where
    transformers is installed: the two compute the same function, so their
    logits differ by their fp32 roundings only (bound: k S of two fp32 runs)."""
    try:
        import transformers
    except ImportError:
        return None
    try:
        hf = transformers.AutoModelForCausalLM.from_pretrained(
            model_path, dtype=torch.float32, attn_implementation="eager")
    except TypeError:  # transformers < 4.56 names it torch_dtype
        hf = transformers.AutoModelForCausalLM.from_pretrained(
            model_path, torch_dtype=torch.float32, attn_implementation="eager")
    hf = hf.to(device).eval()
    with torch.no_grad():
        z_hf = hf(torch.tensor([stream], device=device)).logits[0].float().cpu().numpy()
    ours = tp_decoder.TPDecoder(config, state, dtype=torch.float32, device=device,
                                max_len=len(stream))
    z = tp_decoder.stream_logits(ours, stream).cpu().numpy()
    sens = tp_bounds.Sensitivity(config, state, stream, [tp_bounds.Mode("float32", "unsharded")],
                                 device=device)
    [(scales, head)] = sens.logit_scales(range(len(stream)), [(0, 0)])
    bound = tp_bounds.logit_thresholds(scales[:, :, 0], head)
    ratio = float((np.abs(z - z_hf) / bound).max())
    checks.add(f"fp32 model equals transformers {transformers.__version__} "
               f"{type(hf).__name__}", ratio <= 1.0,
               f"max |dz| {float(np.abs(z - z_hf).max()):.3g}, /bound {ratio:.3f}")
    return {"transformers": transformers.__version__, "max_abs_logit_diff":
            float(np.abs(z - z_hf).max()), "over_bound": ratio}


def _forked_worker(args, env):
    os.environ.clear()
    os.environ.update(env)
    worker(args)


def _start_rank(args, model_path, out, rank, env):
    """Rank `rank`'s process. On the host backend it is forked from this one
    (torch is imported once, not once per rank: on two CPU cores that is most
    of a small run); with GPUs it is a fresh interpreter (CUDA and fork do
    not mix)."""
    if args.device == "host":
        wargs = argparse.Namespace(**vars(args))
        wargs.worker, wargs.rank, wargs.model, wargs.out = True, rank, model_path, out
        p = multiprocessing.get_context("fork").Process(target=_forked_worker, args=(wargs, env))
        p.start()
        return lambda timeout: (p.join(timeout), p.exitcode)[1], p.kill
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--model", model_path,
           "--out", out, "--world-size", str(args.world_size), "--device", args.device,
           "--rank", str(rank)]
    p = subprocess.Popen(cmd, env=env)

    def wait(timeout):
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    return wait, p.kill


def _run_workers(args, model_path, out):
    """One process per rank; returns their results (dicts by regime/dtype)."""
    env = dict(os.environ)
    with tp_common.PrivateBroker() as broker:
        env.update(QR_BROKER_SOCKET=broker.socket, QR_BROKER_AUTOSTART="0")
        ranks = [_start_rank(args, model_path, out, r, env) for r in range(args.world_size)]
        deadline = time.time() + args.timeout
        codes = [wait(max(1, deadline - time.time())) for wait, _ in ranks]
        if None in codes:
            for _, kill in ranks:
                kill()
            raise SystemExit(f"workers did not finish within {args.timeout} s")
    if any(codes):
        raise SystemExit(f"worker exit codes {codes}")
    return [json.load(open(os.path.join(out, f"worker{r}.json")))
            for r in range(args.world_size)]


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
        config = tp_decoder.DecoderConfig(**PRESETS[args.preset])
        model_path = tp_decoder.write_random_model(os.path.join(out, "model"), config,
                                                   seed=args.seed)
    config = tp_decoder.load_config(model_path)
    state = tp_decoder.load_state_dict(model_path)
    if config.hidden_size % 32:
        log("note: hidden_size is not a multiple of 32; quantization blocks straddle tokens and "
            "the decode-step bounds are approximate")
    regimes = args.regimes.split(",")
    if args.world_size != 2 and "INT3" in regimes:
        log("note: INT3 runs only at world size 2; left out")
        regimes.remove("INT3")
    if "FP" not in regimes:
        regimes = ["FP"] + regimes  # the quantized regimes are measured against FP
    dtypes = args.dtypes.split(",")
    prompts = _random_prompts(config.vocab_size, args.prompts, args.seed + 1)
    t0 = time.time()
    stream = _sample_stream(config, state, args.stream_len, args.seed + 2)
    max_len = max(args.stream_len, max(map(len, prompts)) + args.new_tokens)
    variants = args.decode_variants.split(",")
    plan = {"regimes": regimes, "dtypes": dtypes, "prompts": prompts, "stream": stream,
            "new_tokens": args.new_tokens, "max_len": max_len, "sample_every": args.sample_every,
            "decode_variants": variants, "compile_regimes": args.compile_regimes.split(","),
            "group_prefix": f"tp{os.getpid()}-{int(time.time() * 1000) % 100000}"}
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
    workers = _run_workers(args, model_path, out)
    t_workers = time.time() - t0
    if args.device == "host":
        torch.set_num_threads(threads)

    # ---- the checks
    checks = Checks()
    ws = args.world_size
    modes, index = [], {}
    for mode in dtypes:
        dtype, cast = DTYPE_MODES[mode]
        dn = tp_bounds.dtype_name(dtype)
        index[(mode, "unsharded")] = len(modes)
        modes.append(tp_bounds.Mode(dn, "unsharded"))
        for regime in regimes:
            index[(mode, regime)] = len(modes)
            modes.append(tp_bounds.Mode(dn, regime, ws, cast_bf16_to_fp16=cast))
    pairs, pair_of = [], {}
    for mode in dtypes:
        for regime in regimes:
            other = "unsharded" if regime == "FP" else "FP"
            pair_of[(mode, regime)] = len(pairs)
            pairs.append((index[(mode, regime)], index[(mode, other)]))
    # The centering distribution (any works, docs/model-quality.md section 3):
    # the first dtype's FP run.
    p_center = _softmax(np.load(os.path.join(out, f"FP-{dtypes[0]}-stream-logits.npy")))
    t1 = time.time()
    sens = tp_bounds.Sensitivity(config, state, stream, modes, device=args.analysis_device)
    (scales, head), (c_scales, c_head) = sens.logit_scales(range(len(stream)), pairs,
                                                           centers=(None, p_center))
    t_analysis = time.time() - t1

    table = []
    unsharded = {}
    for mode in dtypes:
        dtype, _ = DTYPE_MODES[mode]
        ref_model = tp_decoder.TPDecoder(config, state, dtype=dtype, max_len=max_len,
                                         device=args.analysis_device)
        unsharded[mode] = {
            "stream": tp_decoder.stream_logits(ref_model, stream).cpu().numpy(),
            "tokens": [tp_decoder.greedy_generate(ref_model, p, args.new_tokens)[0]
                       for p in prompts]}
    for regime in regimes:
        for mode in dtypes:
            key = f"{regime}/{mode}"
            res = [w[key] for w in workers]
            row = {"regime": regime, "dtype": mode, "calls_per_rank": res[0]["calls"]}
            checks.add(f"{key} every rank computed the same logits",
                       len({r["stream_digest"] for r in res}) == 1, "stream logits digests")
            row.update(_check_calls(checks, out, regime, mode, ws,
                                    [s for r in res for s in r["samples"]]))
            # Against what: FP against the unsharded model, the rest against FP.
            if regime == "FP":
                ref_z, ref_tokens, ref_name = (unsharded[mode]["stream"],
                                               unsharded[mode]["tokens"], "unsharded")
            else:
                ref_z = np.load(os.path.join(out, f"FP-{mode}-stream-logits.npy"))
                ref_tokens = workers[0][f"FP/{mode}"]["tokens"]["eager"]
                ref_name = "FP"
            z = np.load(os.path.join(out, f"{regime}-{mode}-stream-logits.npy"))
            p = pair_of[(mode, regime)]
            bound = tp_bounds.logit_thresholds(scales[:, :, p], head)
            limits = tp_bounds.distribution_thresholds(c_scales[:, :, p], c_head,
                                                       _softmax(ref_z), stream)
            m = _stream_metrics(ref_z, z, stream)
            ratio = float((np.abs(z - ref_z) / bound).max())
            row.update(m)
            row["logit_error_over_bound"] = ratio
            row["rms_logit_error_over_S"] = float(np.sqrt(((z - ref_z) ** 2).mean()
                                                          / (scales[:, :, p] ** 2).mean()))
            row["kl_bound"] = limits["kl_mean"]
            row["kl_expected"] = limits["kl_expected"]
            row["log_ppl_bound"] = limits["log_ppl"]
            checks.add(f"{key} logits vs {ref_name} within k*S", ratio <= 1.0,
                       f"max |dz|/bound {ratio:.3f} (max |dz| {m['max_abs_logit_error']:.4g})")
            checks.add(f"{key} KL to {ref_name} within bound", m["kl_mean"] <= limits["kl_mean"],
                       f"KL {m['kl_mean']:.3g} <= {limits['kl_mean']:.3g}")
            checks.add(f"{key} KL to {ref_name} within the error model's expectation",
                       m["kl_mean"] <= limits["kl_expected"],
                       f"KL {m['kl_mean']:.3g} <= {limits['kl_expected']:.3g}")
            dppl = abs(m["log_ppl"] - m["log_ppl_ref"])
            checks.add(f"{key} log perplexity vs {ref_name} within bound",
                       dppl <= limits["log_ppl"], f"|d log ppl| {dppl:.3g} <= {limits['log_ppl']:.3g}")
            # Greedy: a token may differ only where the margin is within the bound.
            if regime == "FP":  # the reference is the unsharded model's margin
                def ref_margin_logits(i, seq, first, mode=mode):
                    m = tp_decoder.TPDecoder(config, state, dtype=DTYPE_MODES[mode][0],
                                             max_len=len(seq), device=args.analysis_device)
                    return tp_decoder.stream_logits(m, seq).cpu().numpy()[-1]
            else:
                def ref_margin_logits(i, seq, first, mode=mode):
                    return np.load(os.path.join(out, f"FP-{mode}-prompt{i}-logits.npy"))[first]
            agree, firsts = _check_greedy(
                checks, key, ref_name, config, state, modes, pairs[p], prompts, ref_tokens,
                res[0]["tokens"]["eager"], ref_margin_logits, args.analysis_device)
            row["greedy_agreement"] = float(np.mean(agree))
            row["first_divergence"] = firsts
            eager = res[0]["tokens"]["eager"]
            for variant, toks in res[0]["tokens"].items():
                if variant in EXACT_VARIANTS:
                    checks.add(f"{key} {variant} decode gives the eager tokens", toks == eager,
                               "the same kernels as eager: equal token for token")
                elif variant == "compile":
                    # Inductor fuses the model's own elementwise work (norms,
                    # residuals, SwiGLU, rotary) and keeps it in fp32: every
                    # rounding point then errs by at most what eager's does,
                    # so compiled minus eager is the pair (this mode, this
                    # mode) of the error model, and a token may differ only
                    # where eager's margin is within that pair's bound.
                    mine = index[(mode, regime)]
                    def eager_logits(i, seq, first, regime=regime, mode=mode):
                        return np.load(os.path.join(
                            out, f"{regime}-{mode}-prompt{i}-logits.npy"))[first]
                    agree_c, _ = _check_greedy(
                        checks, f"{key} compile", "eager", config, state, modes,
                        (mine, mine), prompts, eager, toks, eager_logits,
                        args.analysis_device)
                    row["compile_agreement"] = float(np.mean(agree_c))
            table.append(row)
    vs_hf = _compare_transformers(checks, model_path, config, state, stream, args.analysis_device)
    summary = {"model": model_path, "transformers_check": vs_hf, "config": config.to_hf(), "world_size": ws,
               "device": args.device, "one_shot_off": args.one_shot_off,
               "prompts": len(prompts), "new_tokens": args.new_tokens,
               "stream_len": len(stream), "k_sigma": tp_bounds.K_SIGMA,
               "message_bytes": {"decode": config.hidden_size * 2,
                                 "prompt_prefill": [len(p) * config.hidden_size * 2 for p in prompts],
                                 "stream_prefill": len(stream) * config.hidden_size * 2},
               "seconds": {"workers": t_workers, "analysis": t_analysis},
               "table": table, "checks": checks.rows, "failed": checks.failed}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(format_table(summary))
    print(f"{len(checks.rows) - checks.failed} checks passed, {checks.failed} failed "
          f"(results in {out}/results.json)")
    return 1 if checks.failed else 0


def format_table(summary):
    head = ("| regime | dtype | bit-exact calls | worst err/bound | max abs dlogit | dlogit/bound "
            "| KL (expected; bound) | log ppl (ref; bound on the change) | greedy agreement |")
    lines = [head, "|" + " --- |" * 9]
    for r in summary["table"]:
        lines.append(
            f"| {r['regime']} | {r['dtype']} | {r['bit_exact']}/{r['calls_checked']} "
            f"| {r['worst_bound_ratio']:.3f} | {r['max_abs_logit_error']:.3g} "
            f"| {r['logit_error_over_bound']:.3f} "
            f"| {r['kl_mean']:.3g} ({r['kl_expected']:.2g}; {r['kl_bound']:.2g}) "
            f"| {r['log_ppl']:.4f} ({r['log_ppl_ref']:.4f}; {r['log_ppl_bound']:.2g}) "
            f"| {r['greedy_agreement']:.3f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a local Hugging Face directory (Llama or Qwen2); "
                    "default: write a seeded random model (--preset)")
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--device", default="host", choices=["host", "cuda"])
    ap.add_argument("--regimes", default="FP,INT8,INT6,INT4,INT3")
    ap.add_argument("--dtypes", default="fp16,bf16", help="of " + ",".join(DTYPE_MODES))
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
    ap.add_argument("--analysis-device", default="cpu")
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
        worker(args)
        return 0
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
