"""The checks of the tensor-parallel example against the codecs' error
bounds (docs/model-quality.md says why each threshold is what it is): each
sampled all-reduce against the library's host reference and bound, greedy
tokens against a reference run's margins, and our fp32 model against
transformers' where it is installed. Each check is a row of `Checks`."""

import os
import sys

import numpy as np
import torch

import tp_bounds
import tp_decoder


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Checks:
    """The rows of results.json's "checks"; a failed one is also logged."""

    def __init__(self):
        self.rows = []
        self.failed = 0

    def add(self, name, ok, detail):
        self.rows.append({"check": name, "ok": bool(ok), "detail": detail})
        if not ok:
            self.failed += 1
            log(f"FAILED {name}: {detail}")


def check_calls(checks, out, regime, mode, dtype, cast, ws, samples):
    """Sampled calls: equal on every rank, equal to the host reference, in the bound."""
    import quickreduce as qr

    by_call = {}
    for name in samples:
        by_call.setdefault(name.rsplit("-r", 1)[0], []).append(name)
    exact = worst = 0.0
    n = 0

    def tensor(a):  # saved bits -> a CPU tensor of the call's dtype
        return torch.from_numpy(np.ascontiguousarray(a).reshape(-1)).view(dtype)

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


def softmax(z):
    return np.exp(tp_bounds.log_softmax(z))


def stream_metrics(z_ref, z, stream):
    kl = tp_bounds.kl_per_position(z_ref, z)
    return {"max_abs_logit_error": float(np.abs(z - z_ref).max()),
            "kl_mean": float(kl.mean()),
            "log_ppl": tp_bounds.log_perplexity(z, stream),
            "log_ppl_ref": tp_bounds.log_perplexity(z_ref, stream)}


def _greedy_agreement(ref_tokens, tokens):
    """(first position that differs or len, fraction of equal positions)."""
    first = next((i for i, (a, b) in enumerate(zip(ref_tokens, tokens)) if a != b), len(tokens))
    return first, float(np.mean([a == b for a, b in zip(ref_tokens, tokens)]))


def check_greedy(checks, key, ref_name, config, state, modes, pair, prompts, ref_tokens,
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
        # Only the pair's two modes: their bounds are all the margin needs.
        s = tp_bounds.Sensitivity(config, state, seq, [modes[pair[0]], modes[pair[1]]],
                                  device=device)
        scale, head_err = s.margin_scale(len(seq) - 1, a, b, [(0, 1)])
        limit = tp_bounds.K_SIGMA * float(scale[0]) + head_err
        ref_logits = ref_logits_at(i, seq, first)
        margin = float(ref_logits[a] - ref_logits[b])
        checks.add(f"{key} prompt {i} first differing token {first} allowed", margin <= limit,
                   f"{ref_name} margin {margin:.4g} of token {a} over {b} <= {limit:.4g}")
    return agree, firsts


def compare_transformers(checks, model_path, config, state, stream, device, memory_bytes=None,
                         max_flops=None):
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
    hf_name = type(hf).__name__
    del hf  # its memory is the analysis' below
    ours = tp_decoder.TPDecoder(config, state, dtype=torch.float32, device=device,
                                max_len=len(stream))
    z = tp_decoder.stream_logits(ours, stream).cpu().numpy()
    sens = tp_bounds.Sensitivity(config, state, stream, [tp_bounds.Mode("float32", "unsharded")],
                                 device=device)
    too_large = sens.fits(range(len(stream)), [(0, 0)], 1, memory_bytes, max_flops)
    if too_large:
        log(f"note: skipped the bound on our fp32 model against transformers': {too_large} "
            f"(max |dz| {float(np.abs(z - z_hf).max()):.3g})")
        return {"transformers": transformers.__version__, "skipped": too_large,
                "max_abs_logit_diff": float(np.abs(z - z_hf).max())}
    [(scales, head)] = sens.logit_scales(range(len(stream)), [(0, 0)], memory_bytes=memory_bytes)
    bound = tp_bounds.logit_thresholds(scales[:, :, 0], head)
    ratio = float((np.abs(z - z_hf) / bound).max())
    checks.add(f"fp32 model equals transformers {transformers.__version__} "
               f"{hf_name}", ratio <= 1.0,
               f"max |dz| {float(np.abs(z - z_hf).max()):.3g}, /bound {ratio:.3f}")
    return {"transformers": transformers.__version__, "max_abs_logit_diff":
            float(np.abs(z - z_hf).max()), "over_bound": ratio}
