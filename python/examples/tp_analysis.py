"""The driver's side of the tensor-parallel example after its ranks ran: the
error model's modes and pairs (docs/model-quality.md sections 2-3), the logit
scales each pair allows on the stream, the unsharded references, and each
regime's row of the table with its checks (tp_checks)."""

import os
import time

import numpy as np

import tp_bounds
import tp_checks
import tp_decoder
import tp_heldout
import tp_variants
from tp_worker import DTYPE_MODES


class Analysis:
    """What every regime's checks share. `plan` is the driver's plan.json;
    the ranks' FP stream logits must be in `out` (the centering distribution
    is the first dtype's FP run; any works, docs/model-quality.md section 3)."""

    def __init__(self, config, state, plan, ws, out, device, memory_bytes=None, max_flops=None):
        self.config, self.state, self.plan, self.ws, self.out = config, state, plan, ws, out
        self.device = device
        self.memory_bytes, self.max_flops = memory_bytes, max_flops
        regimes, dtypes = plan["regimes"], plan["dtypes"]
        self.modes, self.index = [], {}
        for mode in dtypes:
            dtype, cast = DTYPE_MODES[mode]
            dn = tp_bounds.dtype_name(dtype)
            self.index[(mode, "unsharded")] = len(self.modes)
            self.modes.append(tp_bounds.Mode(dn, "unsharded"))
            for regime in regimes:
                self.index[(mode, regime)] = len(self.modes)
                self.modes.append(tp_bounds.Mode(dn, regime, ws, cast_bf16_to_fp16=cast))
        # Each regime's pair: FP against the unsharded model, the rest against FP.
        self.pairs, self.pair_of = [], {}
        for mode in dtypes:
            for regime in regimes:
                other = "unsharded" if regime == "FP" else "FP"
                self.pair_of[(mode, regime)] = len(self.pairs)
                self.pairs.append((self.index[(mode, regime)], self.index[(mode, other)]))
        p_center = tp_checks.softmax(self._load(f"FP-{dtypes[0]}-stream-logits.npy"))
        t1 = time.time()
        stream = plan["stream"]
        sens = tp_bounds.Sensitivity(config, state, stream, self.modes, device=device)
        self.skipped = sens.fits(range(len(stream)), self.pairs, 2, memory_bytes, max_flops)
        if self.skipped:  # the per-call, cross-rank and greedy-margin checks still run
            self.skipped = ("skipped the logit, KL and perplexity bound checks: " + self.skipped)
            tp_checks.log("note: " + self.skipped)
        else:
            (self.scales, self.head), (self.c_scales, self.c_head) = sens.logit_scales(
                range(len(stream)), self.pairs, centers=(None, p_center),
                memory_bytes=memory_bytes)
        del sens
        self.seconds = time.time() - t1
        self.unsharded = {}
        for mode in dtypes:
            ref_model = tp_decoder.TPDecoder(config, state, dtype=DTYPE_MODES[mode][0],
                                             max_len=plan["max_len"], device=device)
            self.unsharded[mode] = {
                "stream": tp_decoder.stream_logits(ref_model, stream).cpu().numpy(),
                "tokens": [tp_decoder.greedy_generate(ref_model, p, plan["new_tokens"])[0]
                           for p in plan["prompts"]]}
            if plan.get("heldout"):
                self.unsharded[mode]["heldout"] = tp_heldout.run_windows(ref_model,
                                                                         plan["heldout"])

    def _load(self, name):
        return np.load(os.path.join(self.out, name))

    def _reference(self, regime, mode, workers):
        """(stream logits, eager tokens, name, logits at a prompt's first
        differing token) of what `regime` is measured against."""
        if regime == "FP":  # the unsharded model, whose margin is computed anew
            def margin_logits(i, seq, first):
                m = tp_decoder.TPDecoder(self.config, self.state, dtype=DTYPE_MODES[mode][0],
                                         max_len=len(seq), device=self.device)
                return tp_decoder.stream_logits(m, seq).cpu().numpy()[-1]
            ref = self.unsharded[mode]
            return ref["stream"], ref["tokens"], "unsharded", margin_logits

        def margin_logits(i, seq, first):
            return self._load(f"FP-{mode}-prompt{i}-logits.npy")[first]
        return (self._load(f"FP-{mode}-stream-logits.npy"),
                workers[0][f"FP/{mode}"]["tokens"]["eager"], "FP", margin_logits)

    def check_regime(self, checks, regime, mode, workers):
        """The table's row of `regime` in dtype `mode`, adding its checks."""
        config, state, stream, prompts = self.config, self.state, self.plan["stream"], \
            self.plan["prompts"]
        key = f"{regime}/{mode}"
        res = [w[key] for w in workers]
        row = {"regime": regime, "dtype": mode, "calls_per_rank": res[0]["calls"]}
        checks.add(f"{key} every rank computed the same logits",
                   len({r["stream_digest"] for r in res}) == 1, "stream logits digests")
        dtype, cast = DTYPE_MODES[mode]
        row.update(tp_checks.check_calls(checks, self.out, regime, mode, dtype, cast, self.ws,
                                         [s for r in res for s in r["samples"]]))
        ref_z, ref_tokens, ref_name, ref_margin_logits = self._reference(regime, mode, workers)
        z = self._load(f"{regime}-{mode}-stream-logits.npy")
        p = self.pair_of[(mode, regime)]
        m = tp_checks.stream_metrics(ref_z, z, stream)
        row.update(m)
        if self.skipped:
            row["bound_checks"] = self.skipped
        else:
            self._check_stream_bounds(checks, key, ref_name, row, ref_z, z, p)
        # Greedy: a token may differ only where the reference's margin is within the bound.
        eager = res[0]["tokens"]["eager"]
        agree, firsts = tp_checks.check_greedy(
            checks, key, ref_name, config, state, self.modes, self.pairs[p], prompts, ref_tokens,
            eager, ref_margin_logits, self.device)
        row["greedy_agreement"] = float(np.mean(agree))
        row["first_divergence"] = firsts
        if self.plan.get("heldout"):
            row.update(tp_heldout.row_metrics(
                self._load(f"{regime}-{mode}-heldout-logits.npy"),
                self._load(f"FP-{mode}-heldout-logits.npy"), self.unsharded[mode]["heldout"],
                self.plan["heldout"], firsts, self.plan["new_tokens"]))
        row.update(self._check_variants(checks, key, regime, mode, res, eager))
        return row

    def _check_stream_bounds(self, checks, key, ref_name, row, ref_z, z, p):
        """The stream's logits, KL and perplexity against their bounds."""
        m, stream = row, self.plan["stream"]
        scales = self.scales[:, :, p]
        bound = tp_bounds.logit_thresholds(scales, self.head)
        limits = tp_bounds.distribution_thresholds(self.c_scales[:, :, p], self.c_head,
                                                   tp_checks.softmax(ref_z), stream)
        ratio = float((np.abs(z - ref_z) / bound).max())
        row["logit_error_over_bound"] = ratio
        row["rms_logit_error_over_S"] = float(np.sqrt(((z - ref_z) ** 2).mean()
                                                      / (scales ** 2).mean()))
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

    def _check_variants(self, checks, key, regime, mode, res, eager):
        """The decode variants' tokens against eager's."""
        config, state, prompts = self.config, self.state, self.plan["prompts"]
        row = {}
        for variant, toks in res[0]["tokens"].items():
            if variant in tp_variants.EXACT_VARIANTS:
                checks.add(f"{key} {variant} decode gives the eager tokens", toks == eager,
                           "the same kernels as eager: equal token for token")
            elif variant == "compile":
                # Inductor fuses the model's own elementwise work (norms,
                # residuals, SwiGLU, rotary) and keeps it in fp32: every
                # rounding point then errs by at most what eager's does,
                # so compiled minus eager is the pair (this mode, this
                # mode) of the error model, and a token may differ only
                # where eager's margin is within that pair's bound.
                mine = self.index[(mode, regime)]

                def eager_logits(i, seq, first):
                    return self._load(f"{regime}-{mode}-prompt{i}-logits.npy")[first]
                agree_c, _ = tp_checks.check_greedy(
                    checks, f"{key} compile", "eager", config, state, self.modes,
                    (mine, mine), prompts, eager, toks, eager_logits, self.device)
                row["compile_agreement"] = float(np.mean(agree_c))
        return row
