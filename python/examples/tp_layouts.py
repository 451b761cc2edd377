"""Three more layouts of the tensor-parallel decoder (tp_decoder.TPDecoder),
for quickreduce's fused layer boundary (docs/fused.md) and its
reduce-scatter / all-gather (docs/collectives.md):

  * FusedTPDecoder: every layer boundary (the row-parallel partial sum, the
    residual add and the next RMSNorm) is one call of
    torch.ops.quickreduce.all_reduce_residual_rmsnorm. In FP its greedy tokens
    are the unfused model's (the all-reduce and the residual add are the same
    bits; only the RMSNorm's order of the sum of squares differs).
  * a vocabulary-parallel head (vocab_parallel_logits): each rank computes
    the logits of its slice of the vocabulary and the slices are all-gathered
    (torch.ops.quickreduce.all_gather in FP: the fp32 logits travel as pairs
    of 16-bit words, copied exactly), equal to the replicated head's.
  * SequenceParallelTPDecoder (prefill, one sequence): the residual stream is
    split by tokens across the ranks; a boundary is reduce-scatter of the
    partial sums -> residual add and RMSNorm on this rank's tokens ->
    all-gather of the normed tokens for the next column-parallel matmuls
    (vLLM's sequence-parallelism pass). In FP its logits are the all-reduce
    model's.
"""

import torch
import torch.nn.functional as F

from tp_decoder import TPDecoder


class FusedTPDecoder(TPDecoder):
    """`fused(partial [N, H], residual [N, H], weight [H], eps) -> (normed,
    residual_out)` replaces all_reduce + residual add + RMSNorm."""

    def __init__(self, *args, fused, **kwargs):
        super().__init__(*args, **kwargs)
        self.fused = fused

    def _row_parallel(self, x, name):  # the partial sum only: the boundary reduces it
        return self._linear("partial", x, name, bias=False)

    def _boundary(self, partial, h, norm):
        shape = h.shape
        hidden = shape[-1]
        normed, h = self.fused(partial.reshape(-1, hidden).contiguous(),
                               h.reshape(-1, hidden).contiguous(), self.w[norm + ".weight"],
                               self.config.rms_norm_eps)
        return normed.reshape(shape), h.reshape(shape)

    def hidden(self, tokens, positions):
        layers = self.config.num_hidden_layers
        h = self.w["model.embed_tokens.weight"][tokens]
        x = self._rms_norm(h, "model.layers.0.input_layernorm")
        for layer in range(layers):
            p = f"model.layers.{layer}."
            x, h = self._boundary(self._attention(layer, x, positions), h,
                                  p + "post_attention_layernorm")
            nxt = f"model.layers.{layer + 1}.input_layernorm" if layer + 1 < layers \
                else "model.norm"
            x, h = self._boundary(self._mlp(layer, x), h, nxt)
        return x


def vocab_slice(model):
    """(first, last) vocabulary rows of this rank's part of the head."""
    vocab = model.config.vocab_size
    n = vocab // model.world_size
    assert n * model.world_size == vocab, "the vocabulary must split evenly"
    return model.rank * n, (model.rank + 1) * n


def vocab_parallel_logits(model, tokens, positions, all_gather):
    """The logits [B, T, vocab] of `model` with a vocabulary-parallel head:
    this rank's rows of lm_head in fp32, then `all_gather(x [rows, ...]) ->
    [world_size * rows, ...]` of the fp32 logits as 16-bit words (FP copies
    bits, so the result is the replicated head's)."""
    lo, hi = vocab_slice(model)
    hf = model.hidden(tokens, positions).float()
    local = F.linear(hf, model.w["lm_head.weight"][lo:hi].float())  # [B, T, V/ws]
    words = local.permute(2, 0, 1).contiguous().view(torch.float16)  # [V/ws, B, 2T]
    full = all_gather(words).view(torch.float32)  # [V, B, T]
    return full.permute(1, 2, 0)


class SequenceParallelTPDecoder(TPDecoder):
    """Prefill of one sequence whose token count is a multiple of the world
    size. `reduce_scatter(x [T, H]) -> [T / ws, H]` (this rank's tokens of
    the sum) and `all_gather(x [T / ws, H]) -> [T, H]`."""

    def __init__(self, *args, reduce_scatter, all_gather, **kwargs):
        super().__init__(*args, **kwargs)
        self.reduce_scatter, self.all_gather = reduce_scatter, all_gather

    def _row_parallel(self, x, name):
        return self._linear("partial", x, name, bias=False)

    def _gather(self, shard, shape):
        return self.all_gather(shard.reshape(-1, shape[-1]).contiguous()).reshape(shape)

    def _scatter(self, partial):
        return self.reduce_scatter(partial.reshape(-1, partial.shape[-1]).contiguous())

    def hidden(self, tokens, positions):
        B, T = tokens.shape
        ws, layers = self.world_size, self.config.num_hidden_layers
        assert B == 1 and T % ws == 0, "one sequence of a multiple of world_size tokens"
        n = T // ws
        full = self.w["model.embed_tokens.weight"][tokens]
        shape = full.shape
        h = full[0, self.rank * n:(self.rank + 1) * n]  # this rank's residual stream
        x = self._gather(self._rms_norm(h, "model.layers.0.input_layernorm"), shape)
        for layer in range(layers):
            p = f"model.layers.{layer}."
            h = self._residual(h, self._scatter(self._attention(layer, x, positions)))
            x = self._gather(self._rms_norm(h, p + "post_attention_layernorm"), shape)
            h = self._residual(h, self._scatter(self._mlp(layer, x)))
            nxt = f"model.layers.{layer + 1}.input_layernorm" if layer + 1 < layers \
                else "model.norm"
            x = self._gather(self._rms_norm(h, nxt), shape)
        return x


def layouts_rank(rank, world_size, model_dir, group, prompts, new_tokens, stream, env):
    """One rank of the layouts' check on quickreduce (FP): returns, per
    layout, what tp_layouts_test compares with the plain all-reduce model."""
    import os
    os.environ.update(env)
    os.environ["QR_QUANTIZATION"] = "FP"
    torch.set_num_threads(1)
    import quickreduce as qr
    import tp_decoder
    config = tp_decoder.load_config(model_dir)
    state = tp_decoder.load_state_dict(model_dir)
    ops = torch.ops.quickreduce
    eps = config.rms_norm_eps
    with qr.Communicator(group, rank, world_size):
        kw = dict(dtype=torch.float16, max_len=96)
        plain = TPDecoder(config, state, rank, world_size,
                          all_reduce=lambda x: ops.all_reduce(x, group), **kw)
        fused = FusedTPDecoder(
            config, state, rank, world_size, all_reduce=None, **kw,
            fused=lambda x, r, w, e: ops.all_reduce_residual_rmsnorm(x, r, w, e, group))
        seq = SequenceParallelTPDecoder(
            config, state, rank, world_size, all_reduce=None, **kw,
            reduce_scatter=lambda x: ops.reduce_scatter(x, world_size, group),
            all_gather=lambda x: ops.all_gather(x, world_size, group))
        out = {"plain": [tp_decoder.greedy_generate(plain, p, new_tokens)[0] for p in prompts],
               "fused": [tp_decoder.greedy_generate(fused, p, new_tokens)[0] for p in prompts]}
        assert eps == fused.config.rms_norm_eps
        # The vocabulary-parallel head against the replicated one, same hidden states.
        with torch.no_grad():
            plain.reset_cache()
            toks = torch.tensor([stream])
            pos = torch.arange(len(stream))
            replicated = plain(toks, pos)
            plain.reset_cache()
            parallel = vocab_parallel_logits(
                plain, toks, pos, lambda x: ops.all_gather(x, world_size, group))
        out["vocab_parallel_equal"] = torch.equal(parallel, replicated)
        out["stream_plain"] = replicated[0].numpy()
        out["stream_seq"] = tp_decoder.stream_logits(seq, stream).numpy()
    return out
