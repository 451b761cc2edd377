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

import dataclasses
import json
import math
import os

import torch
import torch.nn.functional as F

SUPPORTED_MODEL_TYPES = ("llama", "qwen2")


@dataclasses.dataclass(frozen=True)
class DecoderConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool  # bias on q/k/v (always on in Qwen2)

    @staticmethod
    def from_hf(d):
        """Reads a Hugging Face config.json dict; refuses what this model lacks."""
        model_type = d.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(f"model_type {model_type!r} is not supported "
                             f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
        if d.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {d['hidden_act']!r}: only silu (SwiGLU) is supported")
        # transformers >= 5 writes rope_parameters; earlier configs rope_theta
        # and rope_scaling.
        rope = d.get("rope_parameters") or {}
        scaling = d.get("rope_scaling") or rope
        if scaling.get("rope_type", scaling.get("type")) not in (None, "default"):
            raise ValueError(f"rope scaling {scaling!r} is not supported (only default RoPE)")
        if d.get("mlp_bias", False):
            raise ValueError("mlp_bias is not supported")
        if model_type == "qwen2" and d.get("use_sliding_window", False):
            raise ValueError("Qwen2 sliding-window attention is not supported")
        heads = d["num_attention_heads"]
        hidden = d["hidden_size"]
        return DecoderConfig(
            model_type=model_type,
            vocab_size=d["vocab_size"],
            hidden_size=hidden,
            intermediate_size=d["intermediate_size"],
            num_hidden_layers=d["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=d.get("num_key_value_heads") or heads,
            head_dim=d.get("head_dim") or hidden // heads,
            rms_norm_eps=d.get("rms_norm_eps", 1e-6),
            rope_theta=rope.get("rope_theta", d.get("rope_theta", 10000.0)),
            max_position_embeddings=d.get("max_position_embeddings", 2048),
            tie_word_embeddings=d.get("tie_word_embeddings", False),
            attention_bias=(model_type == "qwen2") or d.get("attention_bias", False),
        )

    def to_hf(self):
        arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[self.model_type]
        d = {
            "architectures": [arch],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_parameters": {"rope_type": "default", "rope_theta": self.rope_theta},
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "torch_dtype": "float32",
        }
        if self.model_type == "llama":
            d["attention_bias"] = self.attention_bias
            d["mlp_bias"] = False
        return d


# ---------------------------------------------------------------- loading


def load_config(path):
    with open(os.path.join(path, "config.json")) as f:
        return DecoderConfig.from_hf(json.load(f))


def _weight_files(path):
    """The checkpoint's weight files, safetensors preferred, as (kind, [files])."""
    for kind, single, index in (("safetensors", "model.safetensors", "model.safetensors.index.json"),
                                ("torch", "pytorch_model.bin", "pytorch_model.bin.index.json")):
        if os.path.exists(os.path.join(path, index)):
            with open(os.path.join(path, index)) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
            return kind, [os.path.join(path, name) for name in files]
        if os.path.exists(os.path.join(path, single)):
            return kind, [os.path.join(path, single)]
    raise FileNotFoundError(f"{path}: no model.safetensors or pytorch_model.bin (or their index)")


def load_state_dict(path):
    """All tensors of a local HF checkpoint by their HF names (float32, CPU)."""
    kind, files = _weight_files(path)
    state = {}
    for name in files:
        if kind == "safetensors":
            import safetensors.torch  # only needed for safetensors checkpoints
            part = safetensors.torch.load_file(name, device="cpu")
        else:
            part = torch.load(name, map_location="cpu")
        state.update(part)
    return {k: v.float() for k, v in state.items()}


def write_random_model(path, config, seed=0, logit_std=6.0):
    """Writes a seeded random model as a local HF directory and returns `path`.

    Projections are N(0, 1/fan_in) so activations keep unit scale, the norms
    are around 1, and the output head is scaled so the logits' standard
    deviation is about `logit_std`: the top tokens are then well separated and
    greedy decoding is not decided by ties. Weights are saved as
    model.safetensors when the `safetensors` module exists, else as
    pytorch_model.bin; both load through `load_state_dict`.
    """
    c = config
    g = torch.Generator().manual_seed(seed)

    def normal(*shape, std):
        return torch.randn(*shape, generator=g) * std

    def norm_weight():
        return 1.0 + 0.1 * torch.randn(c.hidden_size, generator=g)

    q_out = c.num_attention_heads * c.head_dim
    kv_out = c.num_key_value_heads * c.head_dim
    h, i = c.hidden_size, c.intermediate_size
    sd = {"model.embed_tokens.weight": normal(c.vocab_size, h, std=1.0)}
    for layer in range(c.num_hidden_layers):
        p = f"model.layers.{layer}."
        sd[p + "input_layernorm.weight"] = norm_weight()
        sd[p + "self_attn.q_proj.weight"] = normal(q_out, h, std=h ** -0.5)
        sd[p + "self_attn.k_proj.weight"] = normal(kv_out, h, std=h ** -0.5)
        sd[p + "self_attn.v_proj.weight"] = normal(kv_out, h, std=h ** -0.5)
        if c.attention_bias:
            sd[p + "self_attn.q_proj.bias"] = normal(q_out, std=0.1)
            sd[p + "self_attn.k_proj.bias"] = normal(kv_out, std=0.1)
            sd[p + "self_attn.v_proj.bias"] = normal(kv_out, std=0.1)
        sd[p + "self_attn.o_proj.weight"] = normal(h, q_out, std=q_out ** -0.5)
        sd[p + "post_attention_layernorm.weight"] = norm_weight()
        sd[p + "mlp.gate_proj.weight"] = normal(i, h, std=h ** -0.5)
        sd[p + "mlp.up_proj.weight"] = normal(i, h, std=h ** -0.5)
        sd[p + "mlp.down_proj.weight"] = normal(h, i, std=i ** -0.5)
    sd["model.norm.weight"] = norm_weight()
    if not c.tie_word_embeddings:
        sd["lm_head.weight"] = normal(c.vocab_size, h, std=logit_std * h ** -0.5)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(c.to_hf(), f, indent=2)
    try:
        import safetensors.torch
    except ImportError:
        torch.save(sd, os.path.join(path, "pytorch_model.bin"))
    else:
        safetensors.torch.save_file({k: v.contiguous() for k, v in sd.items()},
                                    os.path.join(path, "model.safetensors"))
    return path


# ---------------------------------------------------------------- sharding


def _heads_of_rank(config, rank, world_size):
    """(first q head, q heads, first kv head, kv heads) this rank computes.

    Query heads split evenly. Key/value heads split too when there are at
    least as many as ranks; otherwise each kv head is replicated over
    world_size / num_kv_heads ranks, as in vLLM.
    """
    nh, nkv = config.num_attention_heads, config.num_key_value_heads
    if nh % world_size:
        raise ValueError(f"{nh} attention heads do not split over {world_size} ranks")
    if nkv % world_size and world_size % nkv:
        raise ValueError(f"{nkv} key/value heads neither split over nor replicate to "
                         f"{world_size} ranks")
    q_per_rank = nh // world_size
    if nkv >= world_size:
        kv_per_rank = nkv // world_size
        return rank * q_per_rank, q_per_rank, rank * kv_per_rank, kv_per_rank
    return rank * q_per_rank, q_per_rank, rank // (world_size // nkv), 1


def shard_state_dict(config, state, rank, world_size):
    """This rank's tensors: column slices of q/k/v and gate/up, row slices of
    o/down (as slices of the HF [out, in] weight matrices), the rest whole."""
    c = config
    if c.intermediate_size % world_size:
        raise ValueError(f"intermediate_size {c.intermediate_size} does not split over "
                         f"{world_size} ranks")
    q0, nq, kv0, nkv = _heads_of_rank(c, rank, world_size)
    hd = c.head_dim
    q_rows = slice(q0 * hd, (q0 + nq) * hd)
    kv_rows = slice(kv0 * hd, (kv0 + nkv) * hd)
    step = c.intermediate_size // world_size
    mlp_rows = slice(rank * step, (rank + 1) * step)
    out = {}
    for name, t in state.items():
        if ".self_attn.q_proj." in name:
            t = t[q_rows]
        elif ".self_attn.k_proj." in name or ".self_attn.v_proj." in name:
            t = t[kv_rows]
        elif ".self_attn.o_proj." in name:
            t = t[:, q_rows]
        elif ".mlp.gate_proj." in name or ".mlp.up_proj." in name:
            t = t[mlp_rows]
        elif ".mlp.down_proj." in name:
            t = t[:, mlp_rows]
        out[name] = t.contiguous()
    if c.tie_word_embeddings:
        out["lm_head.weight"] = state["model.embed_tokens.weight"]
    return out


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
        _, self.q_heads, _, self.kv_heads = _heads_of_rank(c, rank, world_size)
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
    step = step or model
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
