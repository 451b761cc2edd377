"""Held-out evaluation of a byte-level model (train_lm.py) in the
tensor-parallel example: the plan's held-out windows, prompts and stream
(from a text file), each rank's teacher-forced logits over the windows, the
per-layer attribution runs (one layer's two all-reduces quantized, the rest
FP), the other layouts' runs (fused boundaries, a vocabulary-parallel head),
and the driver's metrics: loss (nats per byte token), next-token
accuracy, their change against FP, KL to the unsharded model, and the first
greedy divergence (median, 10th percentile)."""

import os

import numpy as np

import lm_corpus
import tp_bounds


# ---------------------------------------------------------------- the plan


def plan_parts(path, config, sequences, length, prompts, prompt_len, stream_len):
    """(held-out windows, prompts, stream) from the text at `path`, whose bytes
    are the tokens; windows and prompts are evenly spaced and disjoint in
    offset (prompts sit halfway between windows)."""
    if config.vocab_size < 256:
        raise SystemExit(f"--heldout needs a byte-level model (vocab >= 256), "
                         f"not vocab {config.vocab_size}")
    tokens = lm_corpus.read_bytes(path)
    windows = lm_corpus.windows(tokens, sequences, length)
    starts = lm_corpus.windows(tokens, prompts, prompt_len, offset=0.5)
    stream = lm_corpus.windows(tokens, 1, stream_len, offset=0.25)[0]
    return windows, starts, stream


# ---------------------------------------------------------------- the ranks


def run_windows(model, windows):
    """Teacher-forced fp32 logits [windows, length, vocab] (one prefill each)."""
    import torch

    import tp_decoder
    return torch.stack([tp_decoder.stream_logits(model, w) for w in windows]).cpu().numpy()


class LayerRouter:
    """The model's all-reduce: call c of a forward belongs to layer
    (c // 2) mod layers; that layer's calls go to the quantized group, the
    rest to the FP group."""

    def __init__(self, layers, fp_group, q_group):
        self.layers, self.fp_group, self.q_group = layers, fp_group, q_group
        self.layer, self.calls = -1, 0

    def __call__(self, x):
        import torch
        layer = (self.calls // 2) % self.layers
        self.calls += 1
        group = self.q_group if layer == self.layer else self.fp_group
        return torch.ops.quickreduce.all_reduce(x, group)


def run_attribution(qr, plan, config, state, rank, ws, device, qr_device, dtype, cast, out):
    """Per attribution regime, each layer quantized alone: rank 0 saves the
    windows' logits as attr-<regime>-<mode>-layer<L>-logits.npy."""
    import tp_decoder
    spec = plan["attribution"]
    for regime in spec["regimes"]:
        names = [f"{plan['group_prefix']}-attr-{regime}-{q}" for q in ("FP", regime)]
        os.environ["QR_CAST_BF16_TO_FP16"] = "1" if cast else "0"
        os.environ["QR_QUANTIZATION"] = "FP"
        with qr.Communicator(names[0], rank, ws, device=qr_device) as fp:
            os.environ["QR_QUANTIZATION"] = regime
            with qr.Communicator(names[1], rank, ws, device=qr_device) as q:
                router = LayerRouter(config.num_hidden_layers, names[0], names[1])
                model = tp_decoder.TPDecoder(config, state, rank, ws, dtype=dtype,
                                             device=device, all_reduce=router,
                                             max_len=plan["max_len"])
                for layer in range(config.num_hidden_layers):
                    router.layer = layer
                    z = run_windows(model, plan["heldout"])
                    if rank == 0:
                        np.save(os.path.join(
                            out, f"attr-{regime}-{spec['dtype']}-layer{layer}-logits.npy"), z)
                q.check()
            fp.check()


LAYOUTS = ("fused", "vocab")  # tp_layouts.py: fused boundaries, vocabulary-parallel head


def run_layouts(qr, plan, config, state, rank, ws, device, qr_device, dtype, cast, mode, out):
    """Per plan layout and regime, the windows' logits of that layout at this
    dtype (rank 0 saves layout-<layout>-<regime>-<mode>-logits.npy):
    "fused", every layer boundary one all_reduce_residual_rmsnorm in the
    regime; "vocab", the regime's all-reduces with a vocabulary-parallel head
    whose logits are all-gathered in FP (exact) over a second group."""
    import torch

    import tp_decoder
    import tp_layouts
    ops = torch.ops.quickreduce
    for layout in plan["layouts"]:
        for regime in plan["regimes"]:
            name = f"{plan['group_prefix']}-{layout}-{regime}-{mode}"
            os.environ["QR_CAST_BF16_TO_FP16"] = "1" if cast else "0"
            os.environ["QR_QUANTIZATION"] = "FP"
            with qr.Communicator(name + "-fp", rank, ws, device=qr_device) as fp:
                os.environ["QR_QUANTIZATION"] = regime
                with qr.Communicator(name, rank, ws, device=qr_device) as comm:
                    kw = dict(dtype=dtype, device=device, max_len=plan["max_len"])
                    if layout == "fused":
                        model = tp_layouts.FusedTPDecoder(
                            config, state, rank, ws, all_reduce=None, **kw,
                            fused=lambda x, r, w, e, g=name: ops.all_reduce_residual_rmsnorm(
                                x, r, w, e, g))
                        z = run_windows(model, plan["heldout"])
                    else:
                        model = tp_decoder.TPDecoder(
                            config, state, rank, ws, **kw,
                            all_reduce=lambda x, g=name: ops.all_reduce(x, g))
                        z = vocab_parallel_windows(
                            model, plan["heldout"],
                            lambda x, g=name + "-fp": ops.all_gather(x, ws, g))
                    comm.check()
                fp.check()
            if rank == 0:
                np.save(os.path.join(out, f"layout-{layout}-{regime}-{mode}-logits.npy"), z)


def vocab_parallel_windows(model, windows, all_gather):
    """run_windows with tp_layouts.vocab_parallel_logits' head."""
    import torch

    import tp_layouts
    dev = model.device
    zs = []
    with torch.no_grad():
        for w in windows:
            model.reset_cache()
            zs.append(tp_layouts.vocab_parallel_logits(
                model, torch.tensor([w], device=dev), torch.arange(len(w), device=dev),
                all_gather)[0])
    return torch.stack(zs).cpu().numpy()


# ---------------------------------------------------------------- the driver


def loss_and_accuracy(z, windows):
    """(mean next-token loss in nats, accuracy) of logits [S, T, V] on windows."""
    w = np.asarray(windows)
    lp = tp_bounds.log_softmax(z[:, :-1])
    target = w[:, 1:]
    picked = np.take_along_axis(lp, target[..., None], -1)[..., 0]
    return float(-picked.mean()), float((lp.argmax(-1) == target).mean())


def mean_kl(z_ref, z):
    v = z.shape[-1]
    return float(tp_bounds.kl_per_position(z_ref.reshape(-1, v), z.reshape(-1, v)).mean())


def row_metrics(z, z_fp, z_unsharded, windows, firsts, new_tokens):
    """The held-out columns of one regime's row; z_fp is the FP run of the
    same dtype (the reference of the changes), z_unsharded the unsharded one."""
    loss, acc = loss_and_accuracy(z, windows)
    loss_fp, acc_fp = loss_and_accuracy(z_fp, windows)
    loss_u, acc_u = loss_and_accuracy(z_unsharded, windows)
    firsts = np.asarray(firsts, dtype=float)
    return {"heldout_loss": loss, "heldout_accuracy": acc,
            "heldout_loss_unsharded": loss_u, "heldout_accuracy_unsharded": acc_u,
            "heldout_dloss_vs_fp": loss - loss_fp,
            "heldout_dloss_vs_fp_pct": 100 * (loss - loss_fp) / loss_fp,
            "heldout_dacc_vs_fp": acc - acc_fp,
            "heldout_kl_to_unsharded": mean_kl(z_unsharded, z),
            "first_divergence_median": float(np.median(firsts)),
            "first_divergence_p10": float(np.percentile(firsts, 10)),
            "greedy_unchanged": float(np.mean(firsts == new_tokens))}


def attribution_rows(out, plan, z_fp, windows):
    """Per attribution regime and layer: the change of loss and the KL against
    the all-FP run when only that layer's all-reduces are quantized."""
    spec = plan.get("attribution")
    if not spec:
        return []
    loss_fp, _ = loss_and_accuracy(z_fp, windows)
    rows = []
    for regime in spec["regimes"]:
        layer = 0
        while os.path.exists(p := os.path.join(
                out, f"attr-{regime}-{spec['dtype']}-layer{layer}-logits.npy")):
            z = np.load(p)
            loss, acc = loss_and_accuracy(z, windows)
            rows.append({"regime": regime, "dtype": spec["dtype"], "layer": layer,
                         "dloss_vs_fp": loss - loss_fp,
                         "dloss_vs_fp_pct": 100 * (loss - loss_fp) / loss_fp,
                         "kl_to_fp": mean_kl(z_fp, z)})
            layer += 1
    return rows


def layout_rows(out, plan, windows, unfused):
    """Per layout, regime and dtype: the held-out loss and its change against
    the unfused layout's FP run of that dtype and against the unfused run of
    the same regime, and the KL to that run. unfused[(regime, mode)] holds
    the unfused layout's logits."""
    rows = []
    for layout in plan.get("layouts", []):
        for mode in plan["dtypes"]:
            loss_fp, _ = loss_and_accuracy(unfused[("FP", mode)], windows)
            for regime in plan["regimes"]:
                z = np.load(os.path.join(out, f"layout-{layout}-{regime}-{mode}-logits.npy"))
                base = unfused[(regime, mode)]
                loss, acc = loss_and_accuracy(z, windows)
                loss_base, _ = loss_and_accuracy(base, windows)
                rows.append({"layout": layout, "regime": regime, "dtype": mode,
                             "heldout_loss": loss, "heldout_accuracy": acc,
                             "dloss_vs_fp_pct": 100 * (loss - loss_fp) / loss_fp,
                             "dloss_vs_unfused": loss - loss_base,
                             "kl_to_unfused": mean_kl(base, z),
                             "equal_to_unfused": bool(np.array_equal(z, base))})
    return rows


def format_table(summary):
    """The held-out table and, where it ran, the per-layer attribution."""
    h = summary["heldout"]
    lines = [f"Held-out: {h['windows']} windows x {h['length']} bytes, "
             f"{summary['prompts']} prompts of {h['prompt_len']} bytes + "
             f"{summary['new_tokens']} greedy tokens (world size {summary['world_size']})", "",
             "| regime | dtype | loss (nats/byte) | change vs FP | accuracy | change vs FP "
             "| KL to unsharded | first divergence median / p10 | unchanged continuations |",
             "|" + " --- |" * 9]
    for r in summary["table"]:
        lines.append(
            f"| {r['regime']} | {r['dtype']} | {r['heldout_loss']:.4f} "
            f"| {r['heldout_dloss_vs_fp']:+.4f} ({r['heldout_dloss_vs_fp_pct']:+.2f} %) "
            f"| {r['heldout_accuracy']:.4f} | {r['heldout_dacc_vs_fp']:+.4f} "
            f"| {r['heldout_kl_to_unsharded']:.3g} "
            f"| {r['first_divergence_median']:.0f} / {r['first_divergence_p10']:.0f} "
            f"| {r['greedy_unchanged']:.2f} |")
    if summary.get("layouts"):
        lines += ["", "Other layouts (tp_layouts.py) against the unfused all-reduce model",
                  "", "| layout | regime | dtype | loss (nats/byte) | change vs FP (unfused) "
                  "| change vs unfused | KL to unfused | bits equal to unfused |",
                  "|" + " --- |" * 8]
        for r in summary["layouts"]:
            lines.append(f"| {r['layout']} | {r['regime']} | {r['dtype']} "
                         f"| {r['heldout_loss']:.4f} | {r['dloss_vs_fp_pct']:+.2f} % "
                         f"| {r['dloss_vs_unfused']:+.5f} | {r['kl_to_unfused']:.3g} "
                         f"| {'yes' if r['equal_to_unfused'] else 'no'} |")
    if summary.get("attribution"):
        lines += ["", "Per layer: only that layer's two all-reduces quantized",
                  "", "| regime | dtype | layer | loss change vs FP | KL to FP |",
                  "| --- | --- | --- | --- | --- |"]
        for r in summary["attribution"]:
            lines.append(f"| {r['regime']} | {r['dtype']} | {r['layer']} "
                         f"| {r['dloss_vs_fp']:+.5f} ({r['dloss_vs_fp_pct']:+.3f} %) "
                         f"| {r['kl_to_fp']:.3g} |")
    return "\n".join(lines)
