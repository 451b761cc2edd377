"""GPU tests of Communicator.reduce_scatter / .all_gather in Python (torch with
CUDA, two ranks as spawned processes; run by python/tests/gpu/run.sh, both
ranks on one GPU under MPS where there is one): eager calls (new output,
out=, in place), a CUDA graph of the calls and of torch.ops.quickreduce.
reduce_scatter / all_gather replayed with new inputs, and those ops under
torch.compile(fullgraph=True).

What they must equal, bit for bit (docs/collectives.md): an FP reduce-scatter
is the fp32 sum in rank order rounded once, an FP all-gather copies bits
(both computed here in torch); a quantized call is what the host backend, the
references' steps across processes, returns for the same inputs (a host
group of two threads in this process). One spawn runs every check: each
costs about 20 s under MPS."""

import pickle
import uuid

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import quickreduce as qr  # noqa: E402
from gpu_ranks import gpus, host_input, spawn_ranks, to_torch  # noqa: E402
from harness import run_threads  # noqa: E402

pytestmark = pytest.mark.gpu
# The ops run the configured regime: FP. No size floor, no cast (the host
# group of the references reads the same environment).
ENV = {"QR_QUANTIZATION": "FP", "QR_MIN_SIZE_BYTES_MB": "0", "QR_CAST_BF16_TO_FP16": "0"}
SEED = 2904
WS = 2
# (regime, dt, rows per rank, columns). At world size 2 a whole message up to
# 4 MiB runs one-shot (exact whatever the regime), larger ones the two-shot
# phase kernels; 601 x 4104 values per rank is not a whole number of tiles.
RS_CASES = [("FP", "fp16", 33, 4096), ("FP", "bf16", 601, 4104),
            ("INT8", "fp16", 33, 4096), ("INT8", "fp16", 601, 4104),
            ("INT8", "bf16", 601, 4104), ("INT8", "bf16cast", 300, 8192)]
AG_CASES = [("FP", "fp16", 33, 4096), ("FP", "bf16", 601, 4104), ("FP", "bf16", 1, 8),
            ("INT8", "bf16", 601, 4104)]
IN_PLACE = 3  # RS_CASES / AG_CASES index also run in place
# The graph: an INT8 reduce-scatter and an FP all-gather by call, the ops
# (configured FP) on other shapes; REPLAYS new inputs.
GRAPH = {"rs": ("INT8", "fp16", 601, 4104), "ag": ("FP", "bf16", 64, 4096),
         "op_rs": ("FP", "bf16", 64, 4096), "op_ag": ("FP", "fp16", 33, 4096)}
REPLAYS = 3


def inputs(dt, rows, cols, who, seed):
    """rank `who`'s input: rows x cols values as a CPU tensor."""
    return to_torch(host_input(dt, rows * cols * 2, who, seed).reshape(rows, cols), dt)


def rs_input(case, who, seed):
    _, dt, rows, cols = case
    return inputs(dt, WS * rows, cols, who, seed)


def ag_input(case, who, seed):
    _, dt, rows, cols = case
    return inputs(dt, rows, cols, who, seed)


def bits(t):
    """A CPU copy of t's 16-bit words (a copy: t may be written again)."""
    return t.detach().to("cpu", copy=True).contiguous().view(torch.int16)


def worker(rank, group, results_path):
    import quickreduce.ops  # noqa: F401

    dev = gpus()[rank]
    torch.cuda.set_device(dev)
    device = torch.device("cuda", dev)
    res = {}
    with qr.Communicator(group, rank, WS, device=device, name="%s-r%d" % (group, rank)) as comm:
        name = comm.name
        # 1. Eager: a new output, out=, and in place for one case of each.
        for i, case in enumerate(RS_CASES):
            regime, dt, rows, _ = case
            kw = dict(regime=regime, cast_bf16_to_fp16=(dt == "bf16cast"))
            x = rs_input(case, rank, SEED + i).to(device)
            got = [comm.reduce_scatter(x, **kw)]
            out = torch.empty_like(got[0])
            assert comm.reduce_scatter(x, out=out, **kw) is out
            got.append(out)
            if i == IN_PLACE:
                comm.reduce_scatter(x, out=x[rank * rows:(rank + 1) * rows], **kw)
                got.append(x[rank * rows:(rank + 1) * rows])
            res["rs", i] = [bits(t) for t in got]
        for i, case in enumerate(AG_CASES):
            regime, _, rows, _ = case
            s = ag_input(case, rank, SEED + 100 + i).to(device)
            got = [comm.all_gather(s, regime=regime)]
            if i == IN_PLACE:
                z = torch.zeros_like(got[0])
                z[rank * rows:(rank + 1) * rows].copy_(s)
                comm.all_gather(z[rank * rows:(rank + 1) * rows], out=z, regime=regime)
                got.append(z)
            res["ag", i] = [bits(t) for t in got]

        # 2. One CUDA graph of all four, captured once, replayed with new
        # inputs copied into the captured ones.
        static = {"rs": rs_input(GRAPH["rs"], rank, 0).to(device),
                  "ag": ag_input(GRAPH["ag"], rank, 0).to(device),
                  "op_rs": rs_input(GRAPH["op_rs"], rank, 0).to(device),
                  "op_ag": ag_input(GRAPH["op_ag"], rank, 0).to(device)}
        rs_out = torch.empty((GRAPH["rs"][2], GRAPH["rs"][3]), dtype=torch.float16,
                             device=device)
        ag_out = torch.empty((WS * GRAPH["ag"][2], GRAPH["ag"][3]), dtype=torch.bfloat16,
                             device=device)

        def body():
            comm.reduce_scatter(static["rs"], out=rs_out, regime="INT8",
                                cast_bf16_to_fp16=False)
            comm.all_gather(static["ag"], out=ag_out, regime="FP")
            return (torch.ops.quickreduce.reduce_scatter(static["op_rs"], WS, name),
                    torch.ops.quickreduce.all_gather(static["op_ag"], WS, name))

        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            body()
        torch.cuda.current_stream(device).wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            op_rs, op_ag = body()
        replays = []
        for k in range(REPLAYS):
            static["rs"].copy_(rs_input(GRAPH["rs"], rank, SEED + 1000 + k))
            static["ag"].copy_(ag_input(GRAPH["ag"], rank, SEED + 1100 + k))
            static["op_rs"].copy_(rs_input(GRAPH["op_rs"], rank, SEED + 1200 + k))
            static["op_ag"].copy_(ag_input(GRAPH["op_ag"], rank, SEED + 1300 + k))
            g.replay()
            torch.cuda.synchronize()
            replays.append({"rs": bits(rs_out), "ag": bits(ag_out), "op_rs": bits(op_rs),
                            "op_ag": bits(op_ag)})
        res["graph"] = replays
        res["healthy"] = comm.healthy

        # 3. torch.compile(fullgraph=True): the ops inside a compiled graph,
        # the same bits as eager.
        def step(t, s):
            return (torch.ops.quickreduce.reduce_scatter(t * 2, WS, name) + 1,
                    torch.ops.quickreduce.all_gather(s, WS, name))

        t = rs_input(GRAPH["op_rs"], rank, SEED + 2000).to(device)
        s = ag_input(GRAPH["op_ag"], rank, SEED + 2001).to(device)
        try:
            compiled = torch.compile(step, fullgraph=True)(t, s)
        except Exception:  # no Triton, say: the graph is still captured whole
            compiled = torch.compile(step, fullgraph=True, backend="aot_eager")(t, s)
        res["compile"] = ([bits(x) for x in compiled], [bits(x) for x in step(t, s)])
    with open(results_path, "wb") as f:
        pickle.dump(res, f)
    return True


_results = {}


def results():
    if not _results:
        _results.update(spawn_ranks(worker, "pycollgpu", ENV))
    return _results


def fp_reduce_scatter(xs, dtype):
    """The FP reduce-scatter's whole result: the fp32 sum in rank order,
    rounded once to the dtype."""
    acc = xs[0].float()
    for x in xs[1:]:
        acc = acc + x.float()
    return acc.to(dtype)


def host_group(calls):
    """Runs calls (a list of (method, per-rank inputs, keyword arguments)) on a
    host group of WS threads; returns each call's per-rank outputs."""
    group = "pycollref-" + uuid.uuid4().hex[:8]

    def body(rank):
        with qr.Communicator(group, rank, WS) as c:
            return [getattr(c, m)(xs[rank], **kw) for m, xs, kw in calls]

    per_rank = run_threads(WS, body, timeout=600)
    return [[per_rank[r][i] for r in range(WS)] for i in range(len(calls))]


def mismatch(got, want):
    """'' when the bits agree, else how many elements differ."""
    want = bits(want)
    if got.shape != want.shape:
        return "shape %s, want %s" % (tuple(got.shape), tuple(want.shape))
    bad = (got != want).sum().item()
    return "" if bad == 0 else "%d of %d values differ" % (bad, got.numel())


def check(label, got_list, want):
    problems = ["%s[%d]: %s" % (label, j, why) for j, got in enumerate(got_list)
                for why in [mismatch(got, want)] if why]
    assert not problems, "\n".join(problems)


def _env(monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)


def test_reduce_scatter_matches_the_reference(monkeypatch):
    _env(monkeypatch)
    quantized = [(i, c) for i, c in enumerate(RS_CASES) if c[0] != "FP"]
    host = host_group([("reduce_scatter", [rs_input(c, r, SEED + i) for r in range(WS)],
                        dict(regime=c[0], cast_bf16_to_fp16=(c[1] == "bf16cast")))
                       for i, c in quantized])
    refs = dict(zip([i for i, _ in quantized], host))
    for i, case in enumerate(RS_CASES):
        regime, dt, rows, _ = case
        xs = [rs_input(case, r, SEED + i) for r in range(WS)]
        total = fp_reduce_scatter(xs, xs[0].dtype) if regime == "FP" else None
        for r in range(WS):
            want = total[r * rows:(r + 1) * rows] if regime == "FP" else refs[i][r]
            check("rank %d %s" % (r, case), results()[r]["rs", i], want)
        if regime != "FP" and 2 * rows * case[3] * 2 > (4 << 20):
            # Two-shot: really quantized (an FP kernel would pass the FP sum).
            exact = fp_reduce_scatter(xs, xs[0].dtype)[:rows]
            assert mismatch(bits(refs[i][0]), exact), case


def test_all_gather_matches_the_reference(monkeypatch):
    _env(monkeypatch)
    quantized = [(i, c) for i, c in enumerate(AG_CASES) if c[0] != "FP"]
    host = host_group([("all_gather", [ag_input(c, r, SEED + 100 + i) for r in range(WS)],
                        dict(regime=c[0])) for i, c in quantized])
    refs = dict(zip([i for i, _ in quantized], host))
    for i, case in enumerate(AG_CASES):
        xs = [ag_input(case, r, SEED + 100 + i) for r in range(WS)]
        for r in range(WS):
            want = torch.cat(xs) if case[0] == "FP" else refs[i][r]
            check("rank %d %s" % (r, case), results()[r]["ag", i], want)
        if case[0] != "FP":
            assert mismatch(bits(refs[i][0]), torch.cat(xs)), case  # lossy: quantized


def test_graph_replays_match_the_reference(monkeypatch):
    _env(monkeypatch)
    rs = GRAPH["rs"]
    host = host_group([("reduce_scatter",
                        [rs_input(rs, r, SEED + 1000 + k) for r in range(WS)],
                        dict(regime="INT8", cast_bf16_to_fp16=False)) for k in range(REPLAYS)])
    for k in range(REPLAYS):
        op_rs = fp_reduce_scatter([rs_input(GRAPH["op_rs"], r, SEED + 1200 + k)
                                   for r in range(WS)], torch.bfloat16)
        ag = torch.cat([ag_input(GRAPH["ag"], r, SEED + 1100 + k) for r in range(WS)])
        op_ag = torch.cat([ag_input(GRAPH["op_ag"], r, SEED + 1300 + k) for r in range(WS)])
        rows = GRAPH["op_rs"][2]
        for r in range(WS):
            got = results()[r]["graph"][k]
            check("replay %d rank %d rs" % (k, r), [got["rs"]], host[k][r])
            check("replay %d rank %d ag" % (k, r), [got["ag"]], ag)
            check("replay %d rank %d op_rs" % (k, r), [got["op_rs"]],
                  op_rs[r * rows:(r + 1) * rows])
            check("replay %d rank %d op_ag" % (k, r), [got["op_ag"]], op_ag)
    assert all(results()[r]["healthy"] for r in range(WS))


def test_torch_compile_fullgraph_matches_eager_and_the_reference():
    rows = GRAPH["op_rs"][2]
    t = [rs_input(GRAPH["op_rs"], r, SEED + 2000) for r in range(WS)]
    s = torch.cat([ag_input(GRAPH["op_ag"], r, SEED + 2001) for r in range(WS)])
    total = fp_reduce_scatter([x * 2 for x in t], torch.bfloat16)
    for r in range(WS):
        compiled, eager = results()[r]["compile"]
        assert [torch.equal(a, b) for a, b in zip(compiled, eager)] == [True, True]
        check("rank %d eager rs" % r, eager[:1], total[r * rows:(r + 1) * rows] + 1)
        check("rank %d eager ag" % r, eager[1:], s)
