"""The torch-free part of the tensor-parallel decoder example: the model's
configuration (Hugging Face config.json keys), where its weights are, the
seeded random weights' recipe, how the weights are split over ranks, and a
private broker for a run. tp_decoder.py (PyTorch) and tp_numpy.py (NumPy, for
machines without PyTorch) share it."""

import dataclasses
import json
import os
import subprocess
import tempfile
import time

import numpy as np

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


# Seeded random models (tp_decoder.write_random_model / tp_numpy.random_state).
PRESETS = {
    # Small enough for CI on two cores; hidden is a multiple of 32 so that a
    # quantization block never straddles two tokens (the bounds assume it).
    "tiny": dict(model_type="qwen2", vocab_size=128, hidden_size=64, intermediate_size=128,
                 num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4, head_dim=8,
                 rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=512,
                 tie_word_embeddings=False, attention_bias=True),
    # The GPU machine's default: Llama layout, 4 layers, GQA 16/8.
    "small": dict(model_type="llama", vocab_size=2048, hidden_size=256, intermediate_size=704,
                  num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=8,
                  head_dim=16, rms_norm_eps=1e-5, rope_theta=500000.0,
                  max_position_embeddings=2048, tie_word_embeddings=False,
                  attention_bias=False),
    # Qwen2.5-0.5B's shape (random weights): what the analysis must survive
    # on one GPU (it skips, and says so, the bound checks that do not fit).
    "qwen2.5-0.5b-shape": dict(model_type="qwen2", vocab_size=151936, hidden_size=896,
                               intermediate_size=4864, num_hidden_layers=24,
                               num_attention_heads=14, num_key_value_heads=2, head_dim=64,
                               rms_norm_eps=1e-6, rope_theta=1000000.0,
                               max_position_embeddings=32768, tie_word_embeddings=True,
                               attention_bias=True),
    # The same at world size 4, where 14 heads do not split: 16 heads of 56
    # (the same projection shapes).
    "qwen2.5-0.5b-shape-16h": dict(model_type="qwen2", vocab_size=151936, hidden_size=896,
                                   intermediate_size=4864, num_hidden_layers=24,
                                   num_attention_heads=16, num_key_value_heads=2, head_dim=56,
                                   rms_norm_eps=1e-6, rope_theta=1000000.0,
                                   max_position_embeddings=32768, tie_word_embeddings=True,
                                   attention_bias=True),
}


# ---------------------------------------------------------------- loading


def load_config(path):
    with open(os.path.join(path, "config.json")) as f:
        return DecoderConfig.from_hf(json.load(f))


def weight_files(path):
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


def random_state(config, normal, logit_std=6.0):
    """The seeded random model's weights by HF name, drawn by
    `normal(*shape, std=...)` (a torch or NumPy generator, in this order).

    Projections are N(0, 1/fan_in) so activations keep unit scale, the norms
    are around 1, and the output head is scaled so the logits' standard
    deviation is about `logit_std`: the top tokens are then well separated and
    greedy decoding is not decided by ties.
    """
    c = config

    def norm_weight():
        return 1.0 + normal(c.hidden_size, std=0.1)

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
    return sd


# ---------------------------------------------------------------- sharding


def heads_of_rank(config, rank, world_size):
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
    q0, nq, kv0, nkv = heads_of_rank(c, rank, world_size)
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
        out[name] = t.contiguous() if hasattr(t, "contiguous") else np.ascontiguousarray(t)
    if c.tie_word_embeddings:
        out["lm_head.weight"] = state["model.embed_tokens.weight"]
    return out


# ---------------------------------------------------------------- the broker


class PrivateBroker:
    """A qr-broker of this run's own (socket in a fresh /tmp directory: a
    Unix socket path is short), stopped at the end, so nothing outlives the run."""

    def __enter__(self):
        from quickreduce import _lib
        binary = os.environ.get("QR_BROKER_BIN") or _lib.binary("qr-broker")
        if not binary:
            raise SystemExit("qr-broker not found: set QR_BROKER_BIN")
        self.dir = tempfile.mkdtemp(prefix="qr-tp-", dir="/tmp")
        self.socket = os.path.join(self.dir, "broker.sock")
        self.log = open(os.path.join(self.dir, "broker.log"), "w")
        self.proc = subprocess.Popen([binary, "--socket", self.socket], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"qr-broker did not start (log: {self.log.name})")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        subprocess.run(["rm", "-rf", self.dir])
