"""The tensor-parallel decoder in NumPy, for machines without PyTorch.

CI's fresh Debian has NumPy but no torch: there this runs the same model
(tp_common's config, random weights and sharding; the arithmetic of
tp_decoder.TPDecoder: fp32 compute from stored values, one rounding to the
model dtype at each point) with one process per rank, each row-parallel
partial sum all-reduced by `qr.Communicator.all_reduce` on a NumPy array, in
every regime. It checks what needs no autograd:

  * every sampled all-reduce equals the library's host reference bit for bit
    and lies within the codec's error bound (every call of the stream, every
    n-th of each generation, every rank);
  * every rank computed the same logits;

and reports, without thresholds (tp_run.py derives those, with PyTorch), the
largest logit change and the greedy agreement against the unsharded model
(FP) or the FP run. fp16 only (NumPy has no bfloat16 without ml_dtypes).

    python3 python/examples/tp_numpy.py [--world-size 2] [--regimes ...]
"""

import argparse
import hashlib
import json
import multiprocessing
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.dirname(HERE))  # the source tree's package, unless one is installed

import tp_common  # noqa: E402

TINY = tp_common.PRESETS["tiny"]


def random_state(config, seed=0):
    g = np.random.default_rng(seed)
    return tp_common.random_state(
        config, lambda *shape, std: (g.standard_normal(shape) * std).astype(np.float32))


class NumpyTPDecoder:
    """One rank's part of the decoder (batch 1), as tp_decoder.TPDecoder."""

    def __init__(self, config, state, rank=0, world_size=1, *, dtype=np.float16,
                 all_reduce=lambda x: x, max_len=128):
        c = self.config = config
        self.dtype, self.all_reduce, self.max_len = dtype, all_reduce, max_len
        _, self.q_heads, _, self.kv_heads = tp_common.heads_of_rank(c, rank, world_size)
        self.w = {k: np.asarray(v).astype(dtype)
                  for k, v in tp_common.shard_state_dict(c, state, rank, world_size).items()}
        inv_freq = 1.0 / (c.rope_theta ** (np.arange(0, c.head_dim, 2) / c.head_dim))
        angles = np.arange(max_len)[:, None] * inv_freq[None, :]
        self.cos = np.cos(angles).astype(np.float32)
        self.sin = np.sin(angles).astype(np.float32)
        shape = (c.num_hidden_layers, self.kv_heads, max_len, c.head_dim)
        self.k_cache = np.zeros(shape, dtype)
        self.v_cache = np.zeros(shape, dtype)

    def reset_cache(self):
        self.k_cache[:] = 0
        self.v_cache[:] = 0

    def _linear(self, x, name, bias=True):
        y = x.astype(np.float32) @ self.w[name + ".weight"].astype(np.float32).T
        b = self.w.get(name + ".bias") if bias else None
        if b is not None:
            y = y + b.astype(np.float32)
        return y.astype(self.dtype)

    def _rms_norm(self, x, name):
        xf = x.astype(np.float32)
        y = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + np.float32(self.config.rms_norm_eps))
        return (y * self.w[name + ".weight"].astype(np.float32)).astype(self.dtype)

    def _rotate(self, x, positions):  # x [heads, T, hd]
        cos, sin = self.cos[positions][None], self.sin[positions][None]
        xf = x.astype(np.float32)
        half = xf.shape[-1] // 2
        x1, x2 = xf[..., :half], xf[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).astype(self.dtype)

    def _attention(self, layer, x, positions):
        c, T = self.config, x.shape[0]
        p = f"model.layers.{layer}.self_attn."
        q = self._linear(x, p + "q_proj").reshape(T, self.q_heads, -1).transpose(1, 0, 2)
        k = self._linear(x, p + "k_proj").reshape(T, self.kv_heads, -1).transpose(1, 0, 2)
        v = self._linear(x, p + "v_proj").reshape(T, self.kv_heads, -1).transpose(1, 0, 2)
        q, k = self._rotate(q, positions), self._rotate(k, positions)
        self.k_cache[layer][:, positions] = k
        self.v_cache[layer][:, positions] = v
        group = self.q_heads // self.kv_heads
        keys = np.repeat(self.k_cache[layer].astype(np.float32), group, axis=0)
        values = np.repeat(self.v_cache[layer].astype(np.float32), group, axis=0)
        scores = q.astype(np.float32) @ keys.transpose(0, 2, 1) / np.float32(np.sqrt(c.head_dim))
        visible = np.arange(self.max_len)[None, :] <= positions[:, None]
        scores = np.where(visible, scores, -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        out = (probs @ values).astype(self.dtype).transpose(1, 0, 2).reshape(T, -1)
        return self.all_reduce(self._linear(out, p + "o_proj", bias=False))

    def _mlp(self, layer, x):
        p = f"model.layers.{layer}.mlp."
        gate = self._linear(x, p + "gate_proj", bias=False).astype(np.float32)
        up = self._linear(x, p + "up_proj", bias=False).astype(np.float32)
        act = (gate / (1 + np.exp(-gate)) * up).astype(self.dtype)
        return self.all_reduce(self._linear(act, p + "down_proj", bias=False))

    def _residual(self, h, y):
        return (h.astype(np.float32) + y.astype(np.float32)).astype(self.dtype)

    def forward(self, tokens, positions):
        """fp32 logits [T, vocab] for token ids at `positions` (arrays)."""
        h = self.w["model.embed_tokens.weight"][np.asarray(tokens)]
        positions = np.asarray(positions)
        for layer in range(self.config.num_hidden_layers):
            p = f"model.layers.{layer}."
            h = self._residual(h, self._attention(layer, self._rms_norm(h, p + "input_layernorm"),
                                                  positions))
            h = self._residual(h, self._mlp(layer, self._rms_norm(h, p + "post_attention_layernorm")))
        h = self._rms_norm(h, "model.norm")
        return h.astype(np.float32) @ self.w["lm_head.weight"].astype(np.float32).T


def greedy_generate(model, prompt, new_tokens):
    model.reset_cache()
    logits = model.forward(prompt, np.arange(len(prompt)))[-1]
    out = []
    for i in range(new_tokens):
        out.append(int(np.argmax(logits)))
        if i + 1 < new_tokens:
            logits = model.forward([out[-1]], [len(prompt) + i])[-1]
    return out


def stream_logits(model, stream):
    model.reset_cache()
    return model.forward(stream, np.arange(len(stream)))


# ---------------------------------------------------------------- the run


def _rank(args, plan, rank, env):
    os.environ.clear()
    os.environ.update(env)
    import quickreduce as qr

    config = tp_common.DecoderConfig(**TINY)
    state = random_state(config, args.seed)
    results = {}
    for regime in plan["regimes"]:
        os.environ["QR_QUANTIZATION"] = regime
        group = f"{plan['group_prefix']}-{regime}"
        with qr.Communicator(group, rank, args.world_size) as comm:
            calls = [0]
            sample = [lambda i: True]

            def all_reduce(x):
                y = comm.all_reduce(np.ascontiguousarray(x))
                if sample[0](calls[0]):
                    np.savez(os.path.join(args.out, f"{regime}-call{calls[0]}-r{rank}.npz"),
                             input=x, output=y)
                calls[0] += 1
                return y

            model = NumpyTPDecoder(config, state, rank, args.world_size, all_reduce=all_reduce,
                                   max_len=plan["max_len"])
            z = stream_logits(model, plan["stream"])
            sample[0] = lambda i: i % args.sample_every == 0
            tokens = [greedy_generate(model, p, args.new_tokens) for p in plan["prompts"]]
            results[regime] = {"digest": hashlib.sha256(z.tobytes()).hexdigest(),
                               "tokens": tokens, "calls": calls[0]}
            if rank == 0:
                np.save(os.path.join(args.out, f"{regime}-stream-logits.npy"), z)
            comm.check()
    with open(os.path.join(args.out, f"worker{rank}.json"), "w") as f:
        json.dump(results, f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--regimes", default="FP,INT8,INT6,INT4,INT3")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--stream-len", type=int, default=16)
    ap.add_argument("--sample-every", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    import quickreduce as qr

    args.out = args.out or tempfile.mkdtemp(prefix="qr-tp-np-")
    os.makedirs(args.out, exist_ok=True)
    regimes = [r for r in args.regimes.split(",") if r != "INT3" or args.world_size == 2]
    if "FP" not in regimes:
        regimes.insert(0, "FP")
    config = tp_common.DecoderConfig(**TINY)
    state = random_state(config, args.seed)
    g = np.random.default_rng(args.seed + 1)
    plan = {"regimes": regimes, "group_prefix": f"tpnp{os.getpid()}",
            "prompts": [g.integers(0, config.vocab_size, 6).tolist() for _ in range(args.prompts)],
            "stream": g.integers(0, config.vocab_size, args.stream_len).tolist()}
    plan["max_len"] = max(args.stream_len, 6 + args.new_tokens)
    os.environ.update(QR_MIN_SIZE_BYTES_MB="0", QR_ONE_SHOT_MAX_KB="0")
    with tp_common.PrivateBroker() as broker:
        env = dict(os.environ, QR_BROKER_SOCKET=broker.socket, QR_BROKER_AUTOSTART="0")
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=_rank, args=(args, plan, r, env))
                 for r in range(args.world_size)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(600)
        codes = [p.exitcode for p in procs]
    if codes != [0] * args.world_size:
        print(f"rank exit codes {codes}")
        return 1
    workers = [json.load(open(os.path.join(args.out, f"worker{r}.json")))
               for r in range(args.world_size)]
    full = NumpyTPDecoder(config, state, max_len=plan["max_len"])
    ref_z = stream_logits(full, plan["stream"])
    ref_tokens = [greedy_generate(full, p, args.new_tokens) for p in plan["prompts"]]
    failed, rows = 0, []
    for regime in regimes:
        names = sorted({f.rsplit("-r", 1)[0] for f in os.listdir(args.out)
                        if f.startswith(regime + "-call")})
        exact = worst = 0
        for name in names:
            calls = [np.load(os.path.join(args.out, f"{name}-r{r}.npz"))
                     for r in range(args.world_size)]
            inputs = [c["input"] for c in calls]
            outs = [c["output"] for c in calls]
            ref = qr.reference_all_reduce(inputs, regime=regime)
            ratio, violations = qr.check_bound(inputs, outs[0], regime=regime)
            ok = all(np.array_equal(o.view(np.uint16), ref.view(np.uint16)) for o in outs)
            exact += ok and violations == 0
            worst = max(worst, ratio)
        same = len({w[regime]["digest"] for w in workers}) == 1
        ok = same and exact == len(names) > 0
        failed += not ok
        z = np.load(os.path.join(args.out, f"{regime}-stream-logits.npy"))
        base_z, base_tokens = ((ref_z, ref_tokens) if regime == "FP" else
                               (np.load(os.path.join(args.out, "FP-stream-logits.npy")),
                                workers[0]["FP"]["tokens"]))
        agree = np.mean([a == b for t, u in zip(workers[0][regime]["tokens"], base_tokens)
                         for a, b in zip(t, u)])
        rows.append(f"| {regime} | {exact}/{len(names)} | {worst:.3f} | {same} "
                    f"| {float(np.abs(z - base_z).max()):.3g} | {agree:.3f} |")
    print("| regime | bit-exact calls | worst err/bound | ranks equal | max abs dlogit "
          "| greedy agreement |\n| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    print(f"{len(regimes) - failed} regimes passed, {failed} failed (results in {args.out})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
