"""The rank side of the GPU tests (test_gpu.py): one spawned process per rank
runs every check on one communicator and returns what the parent compares.
Ranks use the GPUs listed in $QR_TEST_GPUS ("0,1", or "0,0" for two ranks on
one GPU under MPS with QR_ALLOW_SHARED_DEVICE=1). spawn_ranks is the parent
side every GPU suite shares (test_gpu.py, test_gpu_fused.py)."""

import hashlib
import multiprocessing as mp
import os
import pickle
import tempfile

import numpy as np

SEED = 1602
REPLAYS = 1000


def _run_rank(worker, rank, group, path, q):
    try:
        q.put((rank, worker(rank, group, path), None))
    except BaseException as e:
        import traceback
        q.put((rank, False, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())))


def spawn_ranks(worker, name, env, ranks=2, timeout=600):
    """Runs worker(rank, group, results_path) in one spawned process per rank
    (a module-level function, so that the child can import it), with `env`
    set in this process first (the children inherit it), on the group
    "<name>-<pid>"; each worker pickles its results to results_path and
    returns True. Raises AssertionError with every failing rank's traceback;
    returns {rank: results}."""
    os.environ.update(env)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    d = tempfile.mkdtemp(prefix="qr%s-" % name)
    group = "%s-%d" % (name, os.getpid())
    paths = [os.path.join(d, "r%d.pkl" % r) for r in range(ranks)]
    procs = [ctx.Process(target=_run_rank, args=(worker, r, group, paths[r], q))
             for r in range(ranks)]
    for p in procs:
        p.start()
    errors = []
    for _ in procs:
        rank, ok, err = q.get(timeout=timeout)
        if not ok:
            errors.append("rank %d: %s" % (rank, err))
    for p in procs:
        p.join(30)
    assert not errors, "\n".join(errors)
    out = {}
    for r in range(ranks):
        with open(paths[r], "rb") as f:
            out[r] = pickle.load(f)
    return out


def gpus():
    return [int(g) for g in os.environ.get("QR_TEST_GPUS", "0,1").split(",")]


def matrix_cases():
    out = []
    for regime in ("FP", "INT8", "INT6", "INT4", "INT3"):
        for dt in ("fp16", "bf16", "bf16cast"):
            for nbytes in (4112, 256 * 1024, 4 << 20, (4 << 20) + 16, 24 << 20):
                out.append((regime, dt, nbytes))
    return out


def host_input(dt, nbytes, rank, seed):
    from data import make_input
    return make_input(dt[:4], nbytes, rank, seed)


def to_torch(arr, dt):
    import torch
    if dt == "fp16":
        return torch.from_numpy(arr)
    return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)


def digest(t):
    import torch
    return hashlib.sha1(t.detach().cpu().contiguous().view(torch.int16).numpy().tobytes()).hexdigest()


def worker(rank, group, results_path):
    import pickle
    import torch
    import quickreduce as qr
    import quickreduce.ops  # noqa: F401

    dev = gpus()[rank]
    torch.cuda.set_device(dev)
    device = torch.device("cuda", dev)
    res = {}
    with qr.Communicator(group, rank, 2, device=device, name="%s-r%d" % (group, rank)) as comm:
        name = comm.name
        assert comm.device == dev

        # 1. Every regime and dtype, one-shot and two-shot sizes.
        digests = []
        for i, (regime, dt, nbytes) in enumerate(matrix_cases()):
            x = to_torch(host_input(dt, nbytes, rank, SEED + i), dt).to(device)
            y = comm.all_reduce(x, regime=regime, cast_bf16_to_fp16=(dt == "bf16cast"))
            digests.append(digest(y))
        res["matrix"] = digests

        # 2. The current stream: the input is produced on a side stream after a
        # long sleep, reduced there, then overwritten there. On any other
        # stream the all-reduce would read it before or after.
        n = 1 << 20
        s = torch.cuda.Stream(device)
        base = torch.full((n,), float(rank + 1), dtype=torch.float16, device=device)
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(200_000_000)
            x = base * 2
            y = comm.all_reduce(x, regime="FP")
            x.add_(1000)
        s.synchronize()
        res["stream"] = (y.float().min().item(), y.float().max().item())

        # 3. CUDA graphs: the op (configured regime), the in-place op, and a
        # forced INT4 call captured once and replayed REPLAYS times with new
        # inputs; every replay is checked on the device.
        # 4 MiB + 16 bytes: just above world size 2's one-shot ceiling, so the
        # graph holds two-shot kernels.
        n = (1 << 21) + 8
        xs = torch.zeros(n, dtype=torch.float16, device=device)
        xi = torch.zeros(n, dtype=torch.float16, device=device)
        xq = torch.zeros(n, dtype=torch.float16, device=device)
        yq = torch.empty_like(xq)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                torch.ops.quickreduce.all_reduce(xs, name)
                torch.ops.quickreduce.all_reduce_(xi, name)
                comm.all_reduce(xq, out=yq, regime="INT4")
        torch.cuda.current_stream(device).wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            ys = torch.ops.quickreduce.all_reduce(xs, name)
            torch.ops.quickreduce.all_reduce_(xi, name)
            comm.all_reduce(xq, out=yq, regime="INT4")
        # Rank r's input in replay i is the constant r + i % 7: FP sums it
        # exactly, INT4 as the host reference says.
        int4_expect = []
        for k in range(7):
            consts = [np.full(n, r + k, np.float16) for r in range(2)]
            int4_expect.append(torch.from_numpy(qr.reference_all_reduce(consts, "INT4", False))
                               .to(device))
        bad = torch.zeros((), dtype=torch.int64, device=device)
        for i in range(REPLAYS):
            v = float(rank + i % 7)
            xs.fill_(v)
            xi.fill_(v)
            xq.fill_(v)
            g.replay()
            expect = float(1 + 2 * (i % 7))  # (0 + k) + (1 + k)
            bad += (ys != expect).sum() + (xi != expect).sum() + (yq != int4_expect[i % 7]).sum()
        torch.cuda.synchronize()
        res["graph_bad"] = bad.item()
        # One more replay on random data, bit for bit against the reference.
        rnd = to_torch(host_input("fp16", 2 * n, rank, SEED + 999), "fp16").to(device)
        xs.copy_(rnd)
        xi.copy_(rnd)
        xq.copy_(rnd)
        g.replay()
        torch.cuda.synchronize()
        res["graph_random"] = (digest(ys), digest(xi), digest(yq))
        res["healthy_after_graphs"] = comm.healthy

        # 4. torch.compile(fullgraph=True): no graph break around the op, and
        # the same values as eager.
        def step(t):
            return torch.ops.quickreduce.all_reduce(t * 2, name) + 1

        t = to_torch(host_input("fp16", 64 << 10, rank, SEED + 1001), "fp16").to(device)
        try:
            res["compile"] = (digest(torch.compile(step, fullgraph=True)(t)), digest(step(t)))
            res["compile_backend"] = "inductor"
        except Exception as e:  # no Triton, say: the graph is still captured whole
            res["compile_backend"] = "aot_eager (inductor failed: %s)" % str(e).splitlines()[0]
            res["compile"] = (digest(torch.compile(step, fullgraph=True, backend="aot_eager")(t)),
                              digest(step(t)))
        try:
            import torch._dynamo as dynamo
            explained = dynamo.explain(step)(t)
            res["graph_breaks"] = explained.graph_break_count
        except Exception as e:  # explain's API has moved between versions
            res["graph_breaks"] = "explain failed: %s" % e
        res["torch"] = torch.__version__
    with open(results_path, "wb") as f:
        pickle.dump(res, f)
    return True
