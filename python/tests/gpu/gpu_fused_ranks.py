"""The rank side of test_gpu_fused.py: one spawned process per rank runs the
fused all-reduce + residual + RMSNorm (docs/fused.md) eagerly, inside a CUDA
graph replayed with new inputs, and under torch.compile(fullgraph=True), and
its FP8 form eagerly and in a CUDA graph replayed with new inputs and new
scales, and returns digests the parent compares with the host reference."""

import os
import pickle

from gpu_ranks import digest, gpus, host_input, to_torch

SEED = 2803
EPS = 1e-6
REPLAYS = 50
FP8_SCALE = 0.05
# The FP8 graph's replays set these scales in turn: the kernel reads the
# scale's device memory when it runs, not when the graph was captured.
FP8_REPLAY_SCALES = (0.5, 0.02, 4.0)
FP8_REPLAYS = 15
# (tokens, hidden, dtype, regime, in place): one-shot and two-shot sizes.
CASES = [(1, 4096, "fp16", "FP", False), (7, 8192, "bf16", "FP", True),
         (256, 8192, "fp16", "INT4", True), (33, 4096, "bf16", "INT8", False)]


def inputs(case, i, who):
    tokens, hidden, dt, _, _ = case
    return host_input(dt, tokens * hidden * 2, who, SEED + i).reshape(tokens, hidden)


def weight(case, i):
    _, hidden, dt, _, _ = case
    return host_input(dt, hidden * 2, 99, SEED + i)


def worker(rank, group, results_path):
    import torch
    import quickreduce as qr
    import quickreduce.ops  # noqa: F401

    dev = gpus()[rank]
    torch.cuda.set_device(dev)
    device = torch.device("cuda", dev)
    res = {}
    with qr.Communicator(group, rank, 2, device=device, name="%s-r%d" % (group, rank)) as comm:
        name = comm.name
        # 1. Eager, every case; in place as vLLM calls it where the case says.
        out = []
        for i, case in enumerate(CASES):
            _, _, dt, regime, in_place = case
            x = to_torch(inputs(case, i, rank), dt).to(device)
            r = to_torch(inputs(case, i, 100), dt).to(device)
            w = to_torch(weight(case, i), dt).to(device)
            if in_place:
                comm.all_reduce_residual_rmsnorm(x, r, w, EPS, out=x, residual_out=r,
                                                 regime=regime, cast_bf16_to_fp16=False)
                o, ro = x, r
            else:
                o, ro = comm.all_reduce_residual_rmsnorm(x, r, w, EPS, regime=regime,
                                                         cast_bf16_to_fp16=False)
            out.append((digest(o), digest(ro)))
        res["eager"] = out

        # 2. A CUDA graph of the in-place op (configured regime), replayed with
        # new inputs; each replay's outputs are digested.
        case = CASES[0]
        x = torch.zeros(case[0], case[1], dtype=torch.float16, device=device)
        r = torch.zeros_like(x)
        w = to_torch(weight(case, 0), "fp16").to(device)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            torch.ops.quickreduce.all_reduce_residual_rmsnorm_(x, r, w, EPS, name)
        torch.cuda.current_stream(device).wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            torch.ops.quickreduce.all_reduce_residual_rmsnorm_(x, r, w, EPS, name)
        graph = []
        for k in range(REPLAYS):
            x.copy_(to_torch(inputs(case, 1000 + k % 5, rank), "fp16").to(device))
            r.copy_(to_torch(inputs(case, 1000 + k % 5, 100), "fp16").to(device))
            g.replay()
            torch.cuda.synchronize()
            graph.append((digest(x), digest(r)))
        res["graph"] = graph

        # 3. torch.compile(fullgraph=True) of the out-of-place op.
        def step(t, rr, ww):
            o, ro = torch.ops.quickreduce.all_reduce_residual_rmsnorm(t, rr, ww, EPS, name)
            return o, ro

        x = to_torch(inputs(case, 2000, rank), "fp16").to(device)
        r = to_torch(inputs(case, 2000, 100), "fp16").to(device)
        try:
            compiled = torch.compile(step, fullgraph=True)(x, r, w)
        except Exception:  # no Triton, say: the graph is still captured whole
            compiled = torch.compile(step, fullgraph=True, backend="aot_eager")(x, r, w)
        res["compile"] = ([digest(t) for t in compiled], [digest(t) for t in step(x, r, w)])

        # 4. The FP8 form, every case, the scale one float32 on the device.
        scale = torch.tensor([FP8_SCALE], device=device)
        out = []
        for i, case in enumerate(CASES):
            _, _, dt, regime, in_place = case
            x = to_torch(inputs(case, i, rank), dt).to(device)
            r = to_torch(inputs(case, i, 100), dt).to(device)
            w = to_torch(weight(case, i), dt).to(device)
            kw = {"out": x, "residual_out": r} if in_place else {}
            q, o, ro = comm.all_reduce_residual_rmsnorm_fp8(x, r, w, EPS, scale, regime=regime,
                                                            cast_bf16_to_fp16=False, **kw)
            assert q.device == device and q.element_size() == 1 and q.shape == x.shape
            out.append((digest(q), digest(o), digest(ro)))
        res["fp8"] = out

        # 5. A CUDA graph of the FP8 op (configured regime), replayed with new
        # inputs and a new value in the scale tensor each time.
        case = CASES[0]
        x = torch.zeros(case[0], case[1], dtype=torch.float16, device=device)
        r = torch.zeros_like(x)
        w = to_torch(weight(case, 0), "fp16").to(device)
        s = torch.ones(1, 1, device=device)  # vLLM's static scale: [1, 1] float32
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8(x, r, w, s, EPS, name)
        torch.cuda.current_stream(device).wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            q, o, ro = torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8(x, r, w, s, EPS,
                                                                              name)
        graph = []
        for k in range(FP8_REPLAYS):
            x.copy_(to_torch(inputs(case, 1000 + k % 5, rank), "fp16").to(device))
            r.copy_(to_torch(inputs(case, 1000 + k % 5, 100), "fp16").to(device))
            s.fill_(FP8_REPLAY_SCALES[k % len(FP8_REPLAY_SCALES)])
            g.replay()
            torch.cuda.synchronize()
            graph.append((digest(q), digest(o), digest(ro)))
        res["fp8_graph"] = graph
    with open(results_path, "wb") as f:
        pickle.dump(res, f)
    return True
