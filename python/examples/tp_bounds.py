"""Bounds on how far a model's logits move, derived from the all-reduce's
error bound and the rounding of every other operation.

The derivation is in docs/model-quality.md ("Deriving the thresholds"). In
short: a run of tp_decoder.TPDecoder differs from the exact-arithmetic model
only at its rounding points (`probe` sites) and its all-reduces; each
perturbs one stored value by at most a known amount b (u·|v| for a rounding,
docs/codecs.md section 5's bound for an all-reduce). To first order a logit
moves by sum_e g_e·err_e with g the Jacobian at the exact (fp32) model. The
worst case over signs, sum_e |g_e| b_e, is vacuous for INT4/INT3 (the
errors of thousands of values cannot all line up); so, as in probabilistic
rounding-error analysis (Higham and Mary, SIAM J. Sci. Comput. 41(5), 2019),
the errors are modelled as independent with mean zero and bounded by b, and
Hoeffding's inequality bounds the sum by k·S, S^2 = sum_e g_e^2 b_e^2.
"""

import numpy as np
import torch

import tp_decoder

REGIMES = ("FP", "INT8", "INT6", "INT4", "INT3")
U32 = 2.0 ** -24
# Rounding to a 16-bit format: |rn(y) - y| <= rel·|y| + abs, below max.
FORMATS = {"float16": (2.0 ** -11, 2.0 ** -25, 65504.0),
           "bfloat16": (2.0 ** -8, 2.0 ** -134, 3.3895313892515355e38),
           # Only for comparing two fp32 implementations (no all-reduce).
           "float32": (2.0 ** -24, 2.0 ** -150, 3.4028234663852886e38)}

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}

# A batched backward holds, per Jacobian row, the row and the autograd
# intermediates of the perturbations' graph: about this many floats per
# perturbed value (measured on CPU and on an H200 with 12 layers).
ROW_COST = 4


def default_memory_bytes(device):
    """The analysis' memory budget: half the GPU's free memory, or 4 GiB on a CPU."""
    if str(device).startswith("cuda"):
        return torch.cuda.mem_get_info(torch.device(device))[0] // 2
    return 4 << 30


def dtype_name(dtype):
    return {torch.float16: "float16", torch.bfloat16: "bfloat16"}[dtype]


# ------------------------------------------------ the all-reduce's bound


def two_shot_error_bound(regime, cast_bf16_to_fp16, inputs):
    """docs/codecs.md 5.2 for every element of one call, as the library
    computes it (qr.error_bounds): inputs is one tensor per rank of the
    call's dtype; returns the float64 bound on |output - exact sum| per
    element. A one-shot call has FP's bound without the cast: pass regime
    "FP", cast off."""
    import quickreduce as qr

    flat = [x.detach().reshape(-1).cpu().contiguous() for x in inputs]
    n = flat[0].numel()
    pad = -n % 8  # the library takes whole 16-byte messages; zeros raise no block maximum
    if pad:
        flat = [torch.cat([x, x.new_zeros(pad)]) for x in flat]
    return np.asarray(qr.error_bounds(flat, regime, cast_bf16_to_fp16))[:n]


# ------------------------------------------------ the probe


class Mode:
    """One way of running the model: its dtype, and `reduce` = "unsharded" or
    the tensor-parallel all-reduce's regime at `world_size` (`one_shot`: the
    calls run one-shot, which has FP's bound whatever the regime)."""

    def __init__(self, dtype, reduce, world_size=1, cast_bf16_to_fp16=False, one_shot=False):
        self.dtype, self.reduce, self.world_size = dtype, reduce, world_size
        self.cast, self.one_shot = cast_bf16_to_fp16, one_shot
        self.rel, self.abs, _ = FORMATS[dtype]

    def __repr__(self):
        return f"Mode({self.dtype}, {self.reduce}, ws={self.world_size})"


class BoundProbe:
    """Adds a zero perturbation that requires grad at every rounding point of
    an fp32 model and records, per mode, the bound b on that point's error."""

    def __init__(self, modes):
        self.modes = modes
        self.sites = []  # (delta tensor, bounds [M, *shape] float32)
        self.positions = []  # per site, the token position of each element
        self._partials = {}  # world size -> the last row-parallel call's partials

    def _add(self, value, bounds, position_dim=1):
        delta = torch.zeros_like(value, requires_grad=True)
        self.sites.append((delta, torch.stack(bounds).float()))
        # The token position of every element (dimension 1, or 2 for [B, heads, T, d]).
        shape = [1] * value.dim()
        shape[position_dim] = value.shape[position_dim]
        pos = torch.arange(value.shape[position_dim], device=value.device).reshape(shape)
        self.positions.append(pos.expand(value.shape).reshape(-1))
        return value + delta

    def _rounding(self, v, fp32_rel):
        """A value computed in fp32 (relative error <= fp32_rel) and stored."""
        mag = v.abs()
        return [m.rel * mag + m.abs + fp32_rel * mag for m in self.modes]

    def _row_parallel_bounds(self, x, w, full):
        k = x.shape[-1]
        bounds = []
        for m, f in zip(self.modes, full):
            if m.reduce == "unsharded":
                bounds.append(f)
                continue
            ws = m.world_size
            step = k // ws
            cols = [slice(r * step, (r + 1) * step) for r in range(ws)]
            if ws not in self._partials:
                self._partials[ws] = [x[..., c] @ w[:, c].T for c in cols]
            parts = self._partials[ws]
            # Each rank rounds its own partial sum (fp32 accumulation of `step` terms).
            bounds.append(sum(m.rel * p.abs() + m.abs + step * U32 * (x[..., c].abs() @ w[:, c].abs().T)
                              for p, c in zip(parts, cols)))
        return bounds

    def __call__(self, kind, value, **inputs):
        v = value.detach()
        if kind in ("matmul", "partial"):
            x, w, b = inputs["x"].detach(), inputs["weight"].detach(), inputs.get("bias")
            mag = x.abs() @ w.abs().T + (0 if b is None else b.detach().abs())
            full = [m.rel * v.abs() + m.abs + x.shape[-1] * U32 * mag for m in self.modes]
            if kind == "matmul":
                return self._add(value, full)
            self._partials = {}
            return self._add(value, self._row_parallel_bounds(x, w, full))
        if kind == "all_reduce":
            bounds = []
            for m in self.modes:
                if m.reduce == "unsharded":
                    bounds.append(torch.zeros_like(v))
                    continue
                rounded = [p.to(TORCH_DTYPES[m.dtype]) for p in self._partials[m.world_size]]
                regime, cast = ("FP", False) if m.one_shot else (m.reduce, m.cast)
                bound = two_shot_error_bound(regime, cast, rounded)
                bounds.append(torch.from_numpy(bound).reshape(v.shape).to(v.device))
            return self._add(value, bounds)
        if kind == "norm":
            return self._add(value, self._rounding(v, (v.shape[-1] + 16) * U32))
        if kind == "attention":
            probs, values = inputs["probs"].detach(), inputs["values"].detach()
            fp32 = (probs.shape[-1] + 8) * U32 * (probs @ values.abs())
            return self._add(value, [m.rel * v.abs() + m.abs + fp32 for m in self.modes], 2)
        if kind == "rope":
            return self._add(value, self._rounding(v, 8 * U32), 2)
        if kind in ("swiglu", "residual"):
            return self._add(value, self._rounding(v, 8 * U32))
        raise ValueError(f"unknown probe kind {kind!r}")


class Sensitivity:
    """The fp32 model over one token sequence with every rounding point
    perturbable: gives, for linear functionals of the logits, the Hoeffding
    scale S (below) of the difference between two modes' runs.

    A pair (a, b) of mode indices stands for "run a minus run b". Under the
    model of docs/model-quality.md (each stored value errs independently, with
    mean zero, by at most its bound), a functional f = sum_e g_e v_e of the
    perturbations with g = d f / d v satisfies, by Hoeffding's inequality,
        P(|Δf| >= k S) <= 2 exp(-k^2 / 2),   S^2 = sum_e g_e^2 (b_a,e + b_b,e)^2
    (b_a + b_b bounds the difference of the two runs' errors at each point,
    whether or not they are correlated). The fp32 head adds at most
    2 hidden u32 |W||n| per logit, returned separately as `head`.
    """

    def __init__(self, config, state, tokens, modes, device="cpu"):
        self.config, self.modes = config, modes
        self.probe = BoundProbe(modes)
        model = tp_decoder.TPDecoder(config, state, dtype=torch.float32, device=device,
                                     max_len=len(tokens), probe=self.probe)
        t = torch.tensor([tokens], device=device)
        self.hidden = model.hidden(t, torch.arange(len(tokens), device=device))[0]  # [T, H]
        self.head = model.w["lm_head.weight"].float()  # [V, H]
        self.weights_by_name = model.w
        self.deltas = [d for d, _ in self.probe.sites]
        self.device = device

    def _pair_weights(self, pairs):
        """(b_a + b_b)^2 of every perturbation, all sites concatenated: [P, N]."""
        flat = torch.cat([b.reshape(len(self.modes), -1) for _, b in self.probe.sites], dim=1)
        return torch.stack([(flat[a] + flat[c]) ** 2 for a, c in pairs])

    def _hidden_jacobian(self, t, rows):
        """d hidden[t, rows] / d perturbations: [len(rows), N] (one batched backward)."""
        H = self.hidden.shape[-1]
        grad_rows = torch.zeros(len(rows), self.hidden.numel(), device=self.device)
        index = torch.arange(len(rows), device=self.device)
        grad_rows[index, t * H + torch.as_tensor(rows, device=self.device)] = 1.0
        grads = torch.autograd.grad(self.hidden.reshape(-1), self.deltas, grad_outputs=grad_rows,
                                    retain_graph=True, is_grads_batched=True)
        return torch.cat([g.reshape(len(rows), -1) for g in grads], dim=1)

    def cost(self, positions, pairs, centers=1):
        """What logit_scales needs: bytes it cannot chunk (the weights [N, P] and
        one position's Jacobian [H, N], twice), bytes per Jacobian row of a
        batched backward, and floating-point operations (the backward passes
        and the contraction with the head)."""
        N = sum(d.numel() for d in self.deltas)
        H, V = self.hidden.shape[-1], self.head.shape[0]
        T = self.hidden.shape[0]
        layer_weights = sum(v.numel() for k, v in self.weights_by_name.items()
                            if ".layers." in k)
        positions = list(positions)
        flops = sum(2 * V * H * N * (t + 1) / T * centers + 4 * H * T * layer_weights
                    for t in positions)
        return {"fixed_bytes": 4 * N * (len(pairs) + len(self.modes)) + 2 * 4 * H * N,
                "row_bytes": ROW_COST * 4 * N, "flops": flops, "elements": N}

    def fits(self, positions, pairs, centers=1, memory_bytes=None, max_flops=None):
        """None if logit_scales fits the budgets, else why not (a sentence)."""
        c = self.cost(positions, pairs, centers)
        memory_bytes = memory_bytes or default_memory_bytes(self.device)
        if c["fixed_bytes"] + c["row_bytes"] > memory_bytes:
            return (f"the Jacobian of one position needs {c['fixed_bytes'] / 2**30:.1f} GiB "
                    f"({c['elements']} perturbed values), over the "
                    f"{memory_bytes / 2**30:.1f} GiB budget")
        if max_flops is not None and c["flops"] > max_flops:
            return (f"the logit scales need {c['flops'] / 1e12:.0f} TFLOP, over the "
                    f"{max_flops / 1e12:.0f} TFLOP budget")
        return None

    def logit_scales(self, positions, pairs, centers=(None,), memory_bytes=None):
        """For each of `centers`: S [len(positions), vocab, P] for every logit
        and the head term [len, vocab].

        A center None means the logits themselves; probabilities
        [len(positions), vocab] mean the centered logits z_j - sum_i c_i z_i
        (a shift of every logit changes no distribution, and centering
        removes most of it). The backward passes are shared. Memory stays
        within `memory_bytes` (default: default_memory_bytes): the Jacobian
        of each position comes in chunks of rows, the head's product in
        chunks of the vocabulary; call `fits` first, this raises if even one
        row does not fit."""
        memory_bytes = memory_bytes or default_memory_bytes(self.device)
        c = self.cost(positions, pairs, len(centers))
        spare = memory_bytes - c["fixed_bytes"]
        if spare < c["row_bytes"]:
            raise MemoryError(self.fits(positions, pairs, len(centers), memory_bytes))
        rows_per_chunk = max(1, int(spare // c["row_bytes"]))
        vocab_chunk = max(1, int(spare // (2 * 4 * c["elements"])))
        weights = self._pair_weights(pairs).T.contiguous()  # [N, P]
        element_pos = torch.cat(self.probe.positions)
        H = self.hidden.shape[-1]
        positions = list(positions)
        centers = [None if c is None else torch.as_tensor(c, dtype=torch.float32,
                                                          device=self.device) for c in centers]
        out = [([], []) for _ in centers]
        for i, t in enumerate(positions):
            causal = element_pos <= t  # later positions cannot reach logits[t]
            g = torch.cat([self._hidden_jacobian(t, list(range(r, min(H, r + rows_per_chunk))))
                           for r in range(0, H, rows_per_chunk)])[:, causal]
            w = weights[causal]
            for center, (scales, heads) in zip(centers, out):
                head, head_abs = self.head, self.head.abs()
                if center is not None:
                    head = head - center[i] @ head
                    head_abs = head_abs + center[i] @ head_abs
                s2 = torch.cat([(head[v:v + vocab_chunk] @ g).square() @ w
                                for v in range(0, head.shape[0], vocab_chunk)])
                scales.append(s2.sqrt())
                heads.append(2 * H * U32 * (head_abs @ self.hidden[t].detach().abs()))
            del g, w
        return [(torch.stack(s).cpu().double().numpy(), torch.stack(h).cpu().double().numpy())
                for s, h in out]

    def margin_scale(self, position, a, b, pairs):
        """S [P] of logit a minus logit b at `position`, and its head term."""
        weights = self._pair_weights(pairs)
        f = self.hidden[position] @ (self.head[a] - self.head[b]).detach()
        grads = torch.autograd.grad(f, self.deltas, retain_graph=True)
        g = torch.cat([x.reshape(-1) for x in grads])
        s2 = weights.double() @ (g.double() ** 2)
        n = self.hidden[position].detach().double().abs()
        head_err = 2 * len(n) * U32 * float(n @ (self.head[a].abs() + self.head[b].abs()).double())
        return s2.sqrt().cpu().numpy(), head_err


# ------------------------------------------------ metrics and their thresholds


def log_softmax(z):
    z = np.asarray(z, dtype=np.float64)
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def kl_per_position(z_ref, z):
    """KL(p_ref || p) per row, in nats."""
    lp, lq = log_softmax(z_ref), log_softmax(z)
    return (np.exp(lp) * (lp - lq)).sum(-1)


def log_perplexity(z, stream):
    """Mean negative log-likelihood of stream[t+1] given logits row t."""
    lp = log_softmax(z[:-1])
    return float(-lp[np.arange(len(stream) - 1), stream[1:]].mean())


# k of the Hoeffding bound P(|Δf| >= k S) <= 2 exp(-k^2/2): at k = 8 one
# check fails by chance with probability < 3e-14 under the error model.
K_SIGMA = 8.0


def logit_thresholds(scales, head, k=K_SIGMA):
    """|Δ logit_tj| <= E_tj = k S_tj + head_tj (S and head of plain logits)."""
    return k * scales + head


def distribution_thresholds(centered_scales, centered_head, p_ref, stream, k=K_SIGMA):
    """The KL and perplexity bounds (docs/model-quality.md, section 3) from
    c_tj = k S + head of the centered logits, a bound on |Δz_tj - m_t| for
    one shift m_t, and the reference run's probabilities p_ref [T, vocab]:
      KL_t        <= min(sum_j p_tj (e^c_tj - 1 - c_tj),  (max_j c_tj)^2 / 2)
      |Δ log p_t| <= min(c_t,next + log sum_j p_tj e^c_tj,  2 max_j c_tj)
    (the first forms are tight for small c, the second, Hoeffding's lemma
    and the range of Δz, for large). Also the model's estimate of the
    expected KL, mean_t sum_j p_tj S_tj^2 / 2 (second order, no k)."""
    c = k * centered_scales + centered_head
    cmax = c.max(-1)
    with np.errstate(over="ignore"):
        kl = np.minimum((p_ref * (np.expm1(c) - c)).sum(-1), cmax ** 2 / 2)
        t = np.arange(len(stream) - 1)
        lse = np.log((p_ref[:-1] * np.exp(c[:-1])).sum(-1))
    ppl = np.minimum(c[t, np.asarray(stream[1:])] + lse, 2 * cmax[:-1])
    return {"kl_mean": float(kl.mean()), "log_ppl": float(ppl.mean()),
            "kl_expected": float((p_ref * centered_scales ** 2).sum(-1).mean() / 2)}
