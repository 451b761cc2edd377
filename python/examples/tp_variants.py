"""The decode variants of the tensor-parallel example: one decode step as a
CUDA graph, torch.compile (inductor or aot_eager) or TorchScript, each a
`step(token, position) -> logits` that tp_decoder.greedy_generate drives
instead of eager calls to the model."""

import torch

# Decode variants that run eager's kernels (a CUDA graph replays them;
# aot_eager traces through dynamo and AOT autograd with the ops' fake
# implementations, then calls the same ops; TorchScript likewise): their tokens
# equal eager's exactly.
EXACT_VARIANTS = ("graph", "compile-aot", "trace")


def runs_for(variant, regime, compile_regimes):
    """Whether `variant` is decoded for `regime` beyond eager (which always
    runs first; a compile takes tens of seconds, so only compile_regimes)."""
    if variant == "eager":
        return False
    return not variant.startswith("compile") or regime in compile_regimes


def graph_step(model):
    """A decode step captured in a CUDA graph: (token, position) -> logits."""
    dev = model.device
    tok = torch.zeros((1, 1), dtype=torch.long, device=dev)
    pos = torch.zeros((1,), dtype=torch.long, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(2):  # warm-up runs (the caller resets the cache afterwards)
            model(tok, pos)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        out = model(tok, pos)

    def step(token, position):
        tok.copy_(token)
        pos.copy_(position)
        graph.replay()
        return out

    return step


def make_step(variant, model, device):
    """The decode step of `variant` (not eager) over `model`, whose
    all-reduce must be the bare op: graphs and compile see no Python side
    effects."""
    if variant == "graph":
        return graph_step(model)
    if variant in ("compile", "compile-aot"):
        # Each group's model is a new object: one compile each.
        torch._dynamo.config.cache_size_limit = max(64, torch._dynamo.config.cache_size_limit)
        backend = "inductor" if variant == "compile" else "aot_eager"
        return torch.compile(model, fullgraph=True, dynamic=False, backend=backend)
    if variant == "trace":  # TorchScript: what torch 1.13 on a CPU has
        example = (torch.zeros((1, 1), dtype=torch.long, device=device),
                   torch.zeros((1,), dtype=torch.long, device=device))
        with torch.no_grad():
            return torch.jit.trace(model, example, check_trace=False)
    raise ValueError(f"unknown decode variant {variant!r}")
