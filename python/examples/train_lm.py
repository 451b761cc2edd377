"""Trains the byte-level Llama that docs/model-quality.md's first table
measures, from English prose (lm_corpus: Debian's python3.11-doc).

    python3 python/examples/train_lm.py stage --out CORPUS          # here: the text
    python3 python/examples/train_lm.py train --corpus CORPUS --out MODEL --device cuda

`stage` extracts the package's prose into CORPUS (train.txt, heldout.txt,
corpus.json), which then travels to the GPU machine; `train` writes MODEL as
a local Hugging Face directory (config.json + model.safetensors, Llama
layout, byte tokens 0..255: no tokenizer to download), which loads with
`tp_run.py --model MODEL` and transformers' LlamaForCausalLM, plus
train_log.csv (the curve) and train.json (the held-out loss). One seed fixes
the initial weights and the batches; the GPU's kernels (cuBLAS, flash
attention) need not be bitwise deterministic. Defaults (preset "h200"):
12 layers, hidden 512, 8/4 heads of 64, intermediate 1408 (35.7 M
parameters), 512-byte windows, batch 64, AdamW (lr 1.5e-3, 100 warm-up
steps, cosine to a tenth), 1400 steps in bf16 autocast: about 100 s on one
H200 (70 ms per step; `--seconds S` fits the steps to a time instead and
prints the `--steps` that replays it). Weights are not committed: this
command rebuilds them.
"""

import argparse
import csv
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lm_corpus  # noqa: E402
import tp_common  # noqa: E402

PRESETS = {
    "h200": dict(config=dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=12,
                             num_attention_heads=8, num_key_value_heads=4, head_dim=64),
                 steps=1400, batch=64, seq=512, lr=1.5e-3, warmup=100, eval_every=200),
    # CI: a few seconds on two cores.
    "tiny": dict(config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=8, num_key_value_heads=4, head_dim=8),
                 steps=60, batch=8, seq=64, lr=3e-3, warmup=10, eval_every=20),
}


PROBE_STEPS = 40  # steps timed before --seconds fixes the schedule (all within warm-up)
PROBE_SKIP = 10  # of which the first are not timed


def model_config(preset):
    c = dict(model_type="llama", vocab_size=256, rms_norm_eps=1e-5, rope_theta=10000.0,
             max_position_embeddings=2048, tie_word_embeddings=False, attention_bias=False)
    c.update(PRESETS[preset]["config"])
    return tp_common.DecoderConfig(**c)


def build_model(config):
    """A trainable Llama whose state_dict keys are transformers' names."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    c = config

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(c.hidden_size))

        def forward(self, x):
            xf = x.float()
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + c.rms_norm_eps)
            return (y * self.weight.float()).to(x.dtype)

    def linear(i, o):
        return nn.Linear(i, o, bias=False)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            h, hd = c.hidden_size, c.head_dim
            self.q_proj = linear(h, c.num_attention_heads * hd)
            self.k_proj = linear(h, c.num_key_value_heads * hd)
            self.v_proj = linear(h, c.num_key_value_heads * hd)
            self.o_proj = linear(c.num_attention_heads * hd, h)

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            hd = c.head_dim

            def heads(t, n):
                return t.view(B, T, n, hd).transpose(1, 2)

            def rotate(t):  # HF's rotate_half convention, in fp32, stored as t's dtype
                t1, t2 = t[..., :hd // 2].float(), t[..., hd // 2:].float()
                return torch.cat([t1 * cos - t2 * sin, t2 * cos + t1 * sin], -1).to(t.dtype)

            q = rotate(heads(self.q_proj(x), c.num_attention_heads))
            k = rotate(heads(self.k_proj(x), c.num_key_value_heads))
            v = heads(self.v_proj(x), c.num_key_value_heads)
            g = c.num_attention_heads // c.num_key_value_heads
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            if hasattr(F, "scaled_dot_product_attention"):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # torch 1.13
                s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
                mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
                o = torch.softmax(s.masked_fill(mask, float("-inf")), -1) @ v
            return self.o_proj(o.transpose(1, 2).reshape(B, T, -1))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = linear(c.hidden_size, c.intermediate_size)
            self.up_proj = linear(c.hidden_size, c.intermediate_size)
            self.down_proj = linear(c.intermediate_size, c.hidden_size)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
            self.self_attn, self.mlp = Attention(), MLP()

        def forward(self, h, cos, sin):
            h = h + self.self_attn(self.input_layernorm(h), cos, sin)
            return h + self.mlp(self.post_attention_layernorm(h))

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
            self.layers = nn.ModuleList([Layer() for _ in range(c.num_hidden_layers)])
            self.norm = RMSNorm()

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Body()
            self.lm_head = linear(c.hidden_size, c.vocab_size)
            for name, p in self.named_parameters():
                if p.dim() == 2:  # GPT-2's init: residual projections scaled by depth
                    std = 0.02 / math.sqrt(2 * c.num_hidden_layers) \
                        if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                    nn.init.normal_(p, std=std)

        def forward(self, tokens):
            T = tokens.shape[1]
            inv = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, device=tokens.device)
                                          .float() / c.head_dim))
            ang = torch.arange(T, device=tokens.device).float()[:, None] * inv[None]
            cos, sin = ang.cos(), ang.sin()
            h = self.model.embed_tokens(tokens)
            for layer in self.model.layers:
                h = layer(h, cos, sin)
            return self.lm_head(self.model.norm(h)).float()

    return Llama()


def _batch(data, batch, seq, generator, device):
    import torch
    starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=generator)
    rows = data[(starts[:, None] + torch.arange(seq + 1)).to(data.device)]
    return rows[:, :-1], rows[:, 1:]


def heldout_loss(model, windows, autocast):
    """Mean next-byte loss (nats) over held-out windows [N, seq + 1]."""
    import torch
    import torch.nn.functional as F
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad(), autocast():
        for w in windows.split(16):
            z = model(w[:, :-1])
            total += float(F.cross_entropy(z.reshape(-1, z.shape[-1]), w[:, 1:].reshape(-1),
                                           reduction="sum"))
            count += w[:, 1:].numel()
    model.train()
    return total / count


def train(args):
    import contextlib

    import torch
    import torch.nn.functional as F

    import safetensors_io

    p = dict(PRESETS[args.preset])
    if args.seconds and args.steps is None:
        p["steps"] = 10 ** 9  # fixed after PROBE_STEPS
    for k in ("steps", "batch", "seq", "lr"):
        if getattr(args, k) is not None:
            p[k] = getattr(args, k)
    config = model_config(args.preset)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True

    def autocast():
        return torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()

    def load(split):
        with open(os.path.join(args.corpus, f"{split}.txt"), "rb") as f:
            return torch.tensor(list(f.read()), dtype=torch.long)
    data, held = load("train").to(device), load("heldout")
    hw = lm_corpus.windows(held.tolist(), args.eval_windows, p["seq"] + 1)
    held_windows = torch.tensor(hw, dtype=torch.long, device=device)
    model = build_model(config).to(device)
    decay = [q for n, q in model.named_parameters() if q.dim() == 2]
    rest = [q for n, q in model.named_parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=p["lr"], betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(args.seed + 1)
    os.makedirs(args.out, exist_ok=True)
    log_path = os.path.join(args.out, "train_log.csv")
    log = csv.writer(open(log_path, "w", newline=""))
    log.writerow(["step", "seconds", "tokens", "train_loss", "heldout_loss", "heldout_bits_per_byte"])
    t0, running, n_running = time.time(), 0.0, 0
    steps = p["steps"]
    step = 0
    while step < steps:
        step += 1
        if step == PROBE_SKIP + 1:
            t_probe = time.time()  # the first steps pay for kernel selection
        if step == PROBE_STEPS + 1 and args.seconds and args.steps is None:
            # Fit the schedule to the time: the steps so far are warm-up,
            # whose rate does not depend on the total, so `--steps <this>`
            # replays the same run.
            if cuda:
                torch.cuda.synchronize()
            per_step = (time.time() - t_probe) / (PROBE_STEPS - PROBE_SKIP)
            left = args.seconds - (time.time() - t0)
            steps = max(step, step - 1 + int(left / per_step))
            print(f"{per_step * 1e3:.1f} ms per step: {steps} steps (--steps {steps})",
                  flush=True)
        # Linear warm-up, then cosine decay to a tenth.
        if step <= p["warmup"]:
            lr = p["lr"] * step / p["warmup"]
        else:
            done = (step - p["warmup"]) / max(1, steps - p["warmup"])
            lr = p["lr"] * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done)))
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = _batch(data, p["batch"], p["seq"], g, device)
        with autocast():
            z = model(x)
        loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running += float(loss.detach())
        n_running += 1
        if step % p["eval_every"] == 0 or step == steps:
            hl = heldout_loss(model, held_windows, autocast)
            log.writerow([step, round(time.time() - t0, 2), step * p["batch"] * p["seq"],
                          round(running / n_running, 5), round(hl, 5), round(hl / math.log(2), 5)])
            print(f"step {step}/{steps} {time.time() - t0:.1f}s train {running / n_running:.4f} "
                  f"held-out {hl:.4f} nats/byte", flush=True)
            running, n_running = 0.0, 0
        if time.time() - t0 > args.max_seconds:
            print(f"stopped at step {step}: --max-seconds {args.max_seconds}", flush=True)
            break
    seconds = time.time() - t0
    final = heldout_loss(model, held_windows, autocast)
    state = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    safetensors_io.write(os.path.join(args.out, "model.safetensors"), state)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config.to_hf(), f, indent=2)
    n_params = sum(v.size for v in state.values())
    p["steps"] = step
    summary = {"preset": args.preset, "seed": args.seed, "steps": step, "seconds": seconds,
               "parameters": int(n_params), "tokens": step * p["batch"] * p["seq"],
               "heldout_loss_nats_per_byte": final, "heldout_bits_per_byte": final / math.log(2),
               "device": torch.cuda.get_device_name() if cuda else "cpu",
               "torch": torch.__version__, "hyper": p, "config": config.to_hf()}
    corpus_info = os.path.join(args.corpus, "corpus.json")
    if os.path.exists(corpus_info):
        summary["corpus"] = json.load(open(corpus_info))
    with open(os.path.join(args.out, "train.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"trained {n_params / 1e6:.1f} M parameters, {step} steps in {seconds:.0f} s: "
          f"held-out {final:.4f} nats/byte ({final / math.log(2):.3f} bits/byte) -> {args.out}")
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("stage", help="extract the package's prose into a corpus folder")
    st.add_argument("--root", default="/", help="where the package's files are (default /)")
    st.add_argument("--out", required=True)
    tr = sub.add_parser("train", help="train and write the checkpoint")
    tr.add_argument("--corpus", required=True, help="a folder `stage` wrote")
    tr.add_argument("--out", required=True)
    tr.add_argument("--preset", default="h200", choices=sorted(PRESETS))
    tr.add_argument("--device", default="cpu")
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--steps", type=int, help="the schedule's length (default: the preset's, "
                    "or what fits --seconds)")
    tr.add_argument("--seconds", type=float,
                    help="fit the number of steps to this many seconds (measured over the first "
                    f"{PROBE_STEPS} steps; the chosen --steps is printed and logged)")
    tr.add_argument("--batch", type=int)
    tr.add_argument("--seq", type=int)
    tr.add_argument("--lr", type=float)
    tr.add_argument("--eval-windows", type=int, default=64)
    tr.add_argument("--max-seconds", type=float, default=290,
                    help="a safety stop (the run is then shorter than its schedule)")
    args = ap.parse_args(argv)
    if args.cmd == "stage":
        print(json.dumps(lm_corpus.stage(args.root, args.out), indent=1))
        return 0
    train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
