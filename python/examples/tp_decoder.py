"""A tensor-parallel Llama/Qwen2 decoder, written out by hand.

One process per rank. Every rank holds:
  * the embedding, the norms and the output head, replicated;
  * a column slice of q/k/v (whole attention heads) and of gate/up;
  * the matching row slice of o_proj and down_proj, whose partial sums are
    added across ranks by an all-reduce (`torch.ops.quickreduce.all_reduce`
    in the example, any `all_reduce(tensor) -> tensor` here).

So a layer runs two all-reduces, each of `tokens x hidden_size` values:

    h = h + all_reduce(o_proj_r(attention_r(q_r, k_r, v_r)))
    h = h + all_reduce(down_r(silu(gate_r(x)) * up_r(x)))

The arithmetic is stated exactly, because the quality checks bound it
(docs/model-quality.md): activations are stored in the model dtype
(fp16/bf16); every matmul accumulates in fp32 and is rounded once to that
dtype; RMSNorm, rotary embeddings, softmax and SwiGLU compute in fp32 from
stored values and round once. Each such rounding passes through
`probe(kind, value, **inputs)`, which returns `value` and is a no-op in normal
runs; tp_bounds.py uses it to perturb and measure every rounding point.

Loading reads a local Hugging Face directory (config.json with Llama or Qwen2
keys, weights as *.safetensors or pytorch_model*.bin, sharded or not, with HF
weight names), so `--model PATH` works for a real checkpoint and for the
seeded random model `write_random_model` writes.
"""

import json
import math
import os

import torch
import torch.nn.functional as F

from tp_common import (SUPPORTED_MODEL_TYPES, DecoderConfig, heads_of_rank,  # noqa: F401
                       load_config, random_state, shard_state_dict, weight_files)

# ---------------------------------------------------------------- loading


def load_state_dict(path):
    """All tensors of a local HF checkpoint by their HF names (float32, CPU)."""
    kind, files = weight_files(path)
    state = {}
    for name in files:
        if kind == "safetensors":
            try:
                import safetensors.torch
            except ImportError:  # the format by hand (safetensors_io)
                import safetensors_io
                part = {k: torch.from_numpy(v) for k, v in safetensors_io.read(name).items()}
            else:
                part = safetensors.torch.load_file(name, device="cpu")
        else:
            part = torch.load(name, map_location="cpu")
        state.update(part)
    return {k: v.float() for k, v in state.items()}


def write_random_model(path, config, seed=0, logit_std=6.0):
    """Writes the seeded random model (tp_common.random_state) as a local HF
    directory and returns `path`: model.safetensors when the `safetensors`
    module exists, else pytorch_model.bin; both load through `load_state_dict`."""
    g = torch.Generator().manual_seed(seed)
    sd = random_state(config, lambda *shape, std: torch.randn(*shape, generator=g) * std,
                      logit_std)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config.to_hf(), f, indent=2)
    try:
        import safetensors.torch
    except ImportError:
        torch.save(sd, os.path.join(path, "pytorch_model.bin"))
    else:
        safetensors.torch.save_file({k: v.contiguous() for k, v in sd.items()},
                                    os.path.join(path, "model.safetensors"))
    return path



# ---------------------------------------------------------------- the model


def _no_probe(kind, value, **inputs):
    return value


def identity_all_reduce(x):
    return x


class TPDecoder(torch.nn.Module):
    """One rank's part of the decoder, with a static KV cache.

    `forward(tokens [B, T], positions [T])` writes the new keys/values at
    `positions` and returns fp32 logits [B, T, vocab]. Shapes never depend on
    how much of the cache is filled (masking does that), so a decode step can
    be captured in a CUDA graph or compiled once.
    """

    def __init__(self, config, state, rank=0, world_size=1, *, dtype=torch.float16,
                 device="cpu", all_reduce=identity_all_reduce, max_batch=1, max_len=256,
                 probe=_no_probe):
        super().__init__()
        c = self.config = config
        self.rank, self.world_size = rank, world_size
        self.dtype, self.device = dtype, torch.device(device)
        self.all_reduce = all_reduce
        self.probe = probe
        _, self.q_heads, _, self.kv_heads = heads_of_rank(c, rank, world_size)
        shard = shard_state_dict(c, state, rank, world_size)
        self.w = {k: v.to(self.device, dtype) for k, v in shard.items()}
        # fp32 matmuls on CPU (PyTorch has no fp16 CPU matmul); on GPUs the
        # dtype matmul accumulates in fp32 and rounds once, the same arithmetic.
        self.upcast_matmul = self.device.type == "cpu"
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float64)
                                           / c.head_dim))
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
        self.cos = torch.cos(angles).float().to(self.device)  # [max_len, head_dim/2]
        self.sin = torch.sin(angles).float().to(self.device)
        self.max_batch, self.max_len = max_batch, max_len
        shape = (c.num_hidden_layers, max_batch, self.kv_heads, max_len, c.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=self.device),
                             persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=self.device),
                             persistent=False)

    def reset_cache(self):
        self.k_cache.zero_()
        self.v_cache.zero_()

    # -- pieces

    def _round(self, x):
        return x.to(self.dtype)

    def _linear(self, kind, x, name, bias=True):
        """x @ W.T (+ b), accumulated in fp32 and rounded once to the dtype."""
        w = self.w[name + ".weight"]
        b = self.w.get(name + ".bias") if bias else None
        if self.upcast_matmul:
            y = F.linear(x.float(), w.float(), None if b is None else b.float())
        else:
            y = F.linear(x, w, b)
        return self.probe(kind, self._round(y), x=x, weight=w, bias=b)

    def _rms_norm(self, x, name):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.config.rms_norm_eps)
        return self.probe("norm", self._round(y * self.w[name + ".weight"].float()))

    def _rotate(self, x, positions):
        """Rotary embedding, HF's rotate_half convention, in fp32."""
        cos = self.cos[positions][None, None]  # [1, 1, T, hd/2]
        sin = self.sin[positions][None, None]
        xf = x.float()
        half = xf.shape[-1] // 2
        x1, x2 = xf[..., :half], xf[..., half:]
        out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
        return self.probe("rope", self._round(out))

    def _row_parallel(self, x, name):
        """This rank's partial sum of x @ W.T, then the sum over ranks."""
        partial = self._linear("partial", x, name, bias=False)
        return self.probe("all_reduce", self.all_reduce(partial), partial=partial)

    def _attention(self, layer, x, positions):
        c = self.config
        B, T, _ = x.shape
        hd = c.head_dim
        p = f"model.layers.{layer}.self_attn."
        q = self._linear("matmul", x, p + "q_proj").view(B, T, self.q_heads, hd).transpose(1, 2)
        k = self._linear("matmul", x, p + "k_proj").view(B, T, self.kv_heads, hd).transpose(1, 2)
        v = self._linear("matmul", x, p + "v_proj").view(B, T, self.kv_heads, hd).transpose(1, 2)
        q, k = self._rotate(q, positions), self._rotate(k, positions)
        # The cache holds every position; index_copy_ with a position tensor
        # keeps the step's shapes static (graphs, compile).
        self.k_cache[layer, :B].index_copy_(2, positions, k)
        self.v_cache[layer, :B].index_copy_(2, positions, v)
        keys = self.k_cache[layer, :B].float()
        values = self.v_cache[layer, :B].float()
        group = self.q_heads // self.kv_heads
        if group > 1:  # GQA: each kv head serves `group` query heads
            keys = keys.repeat_interleave(group, dim=1)
            values = values.repeat_interleave(group, dim=1)
        scores = (q.float() @ keys.transpose(-1, -2)) / math.sqrt(hd)  # [B, h, T, max_len]
        visible = torch.arange(self.max_len, device=x.device)[None, :] <= positions[:, None]
        scores = scores.masked_fill(~visible, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = self.probe("attention", self._round(probs @ values), probs=probs, values=values)
        out = out.transpose(1, 2).reshape(B, T, self.q_heads * hd)
        return self._row_parallel(out, p + "o_proj")

    def _mlp(self, layer, x):
        p = f"model.layers.{layer}.mlp."
        gate = self._linear("matmul", x, p + "gate_proj", bias=False)
        up = self._linear("matmul", x, p + "up_proj", bias=False)
        act = self.probe("swiglu", self._round(F.silu(gate.float()) * up.float()))
        return self._row_parallel(act, p + "down_proj")

    def _residual(self, h, y):
        return self.probe("residual", self._round(h.float() + y.float()))

    # -- the network

    def hidden(self, tokens, positions):
        """The final normed hidden states [B, T, hidden] (the head's input)."""
        h = self.w["model.embed_tokens.weight"][tokens]
        for layer in range(self.config.num_hidden_layers):
            p = f"model.layers.{layer}."
            h = self._residual(h, self._attention(layer, self._rms_norm(h, p + "input_layernorm"),
                                                  positions))
            h = self._residual(h, self._mlp(layer, self._rms_norm(h, p + "post_attention_layernorm")))
        return self._rms_norm(h, "model.norm")

    def forward(self, tokens, positions):
        # The head stays in fp32: logits are compared, not passed on.
        return F.linear(self.hidden(tokens, positions).float(), self.w["lm_head.weight"].float())


# ---------------------------------------------------------------- decoding


@torch.no_grad()
def greedy_generate(model, prompt, new_tokens, step=None):
    """Prefill `prompt` (list of ids), then `new_tokens` greedy steps.

    `step(token [1, 1], position [1]) -> logits` runs one decode step; the
    default calls the model eagerly (pass a graph replay or a compiled
    function to test those). Returns (generated ids, fp32 logits of every
    generated position [new_tokens, vocab]).
    """
    model.reset_cache()
    dev = model.device
    step = model if step is None else step
    tokens = torch.tensor([prompt], device=dev)
    logits = model(tokens, torch.arange(len(prompt), device=dev))[0, -1]
    out, all_logits = [], []
    for i in range(new_tokens):
        all_logits.append(logits.clone())
        token = int(torch.argmax(logits))
        out.append(token)
        if i + 1 == new_tokens:
            break
        pos = torch.tensor([len(prompt) + i], device=dev)
        logits = step(torch.tensor([[token]], device=dev), pos)[0, -1]
    return out, torch.stack(all_logits)


@torch.no_grad()
def stream_logits(model, stream):
    """fp32 logits [len(stream), vocab] of one prefill over a token stream."""
    model.reset_cache()
    dev = model.device
    return model(torch.tensor([stream], device=dev), torch.arange(len(stream), device=dev))[0]
