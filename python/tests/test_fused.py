"""Communicator.all_reduce_residual_rmsnorm on the host backend with ranks as
processes, at world sizes 2, 4 and 8 (docs/fused.md): regimes, fp16 / bf16
(NumPy bits) with and without the cast, the configured regime, one-shot and
two-shot sizes, the in-place layouts and no residual. Every rank's outputs
must equal the library's host reference of the same call bit for bit, so all
ranks agree; invalid arguments raise before anything is sent."""

import hashlib

import numpy as np
import pytest

import quickreduce as qr
from data import make_input
from fused_cases import ENV, WORLD_SIZES, GroupRuns, base_cases
from fused_cases import call_kwargs as _kwargs
from harness import run_threads

EPS = 1e-5
SEED = 2801


def cases_for(ws):
    """base_cases, each with its buffer layout (below)."""
    return [c + (n % 4,) for n, c in enumerate(base_cases(ws))]


def _data(case, i, who):
    _, dt, tokens, hidden, _ = case
    return make_input(dt[:4], tokens * hidden * 2, who, SEED + i).reshape(tokens, hidden)


def _weight(case, i):
    _, dt, _, hidden, _ = case
    return make_input(dt[:4], hidden * 2, 99, SEED + i)


def _rank_body(rank, ws, group, cases):
    digests = []
    with qr.Communicator(group, rank, ws, timeout_ms=30000) as comm:
        for i, case in enumerate(cases):
            layout = case[4]
            x, residual, w = _data(case, i, rank), _data(case, i, 100), _weight(case, i)
            if layout == 0:    # new outputs
                out, ro = comm.all_reduce_residual_rmsnorm(x, residual, w, EPS, **_kwargs(case))
            elif layout == 1:  # vLLM's: the residual in place, the norm over the input
                out, ro = comm.all_reduce_residual_rmsnorm(x, residual, w, EPS, out=x,
                                                           residual_out=residual, **_kwargs(case))
                assert out is x and ro is residual
            elif layout == 2:  # residual_out over the input
                out, ro = comm.all_reduce_residual_rmsnorm(x, residual, w, EPS, residual_out=x,
                                                           **_kwargs(case))
                assert ro is x
            else:              # no residual
                out, ro = comm.all_reduce_residual_rmsnorm(x, None, w, EPS, **_kwargs(case))
            digests.append((hashlib.sha1(out.tobytes()).hexdigest(),
                            hashlib.sha1(ro.tobytes()).hexdigest()))
    return digests


_group_results = GroupRuns("pyfused", _rank_body, cases_for)


ALL = [(ws, i, c) for ws in WORLD_SIZES for i, c in enumerate(cases_for(ws))]


@pytest.mark.parametrize("ws, index, case", ALL,
                         ids=["ws%d-%s-%s-%dx%d-l%d" % ((ws, c[0] or "configured") + c[1:])
                              for ws, _, c in ALL])
def test_fused_matches_reference(ws, index, case, monkeypatch):
    digests = [rank[index] for rank in _group_results(ws)]
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    inputs = [_data(case, index, r) for r in range(ws)]
    residual = None if case[4] == 3 else _data(case, index, 100)
    out, ro = qr.reference_all_reduce_residual_rmsnorm(inputs, residual, _weight(case, index), EPS,
                                                       **_kwargs(case))
    want = (hashlib.sha1(out.tobytes()).hexdigest(), hashlib.sha1(ro.tobytes()).hexdigest())
    assert digests == [want] * ws, "ranks' results differ from the reference"
    # residual_out is the plain all-reduce's bits plus the residual.
    plain = qr.reference_all_reduce(inputs, **_kwargs(case))
    if residual is None:
        assert np.array_equal(ro.view(np.uint16), plain.view(np.uint16))
    else:
        assert not np.array_equal(ro.view(np.uint16), plain.view(np.uint16))


def test_invalid_arguments_raise_before_anything_runs(group_name):
    def body(rank):
        with qr.Communicator(group_name, rank, 2) as c:
            x = np.ones((4, 64), np.float16)
            r = np.ones((4, 64), np.float16)
            w = np.ones(64, np.float16)
            with pytest.raises(qr.InvalidArgument, match="overlap"):
                c.all_reduce_residual_rmsnorm(x, r, w, EPS, out=r, regime="FP")
            with pytest.raises(qr.InvalidArgument, match="overlap"):
                c.all_reduce_residual_rmsnorm(x, r, w, EPS, out=x, residual_out=x, regime="FP")
            with pytest.raises(qr.InvalidArgument, match="rows"):
                c.all_reduce_residual_rmsnorm(x, r, np.ones(48, np.float16), EPS, regime="FP")
            with pytest.raises(qr.InvalidArgument, match="weight holds 120 bytes"):
                c.all_reduce_residual_rmsnorm(x.reshape(-1)[:240], None,
                                              np.ones(60, np.float16), EPS, regime="FP")
            with pytest.raises(qr.InvalidArgument, match="weight"):
                c.all_reduce_residual_rmsnorm(x, r, w.astype(np.float32), EPS, regime="FP")
            with pytest.raises(qr.InvalidArgument, match="residual"):
                c.all_reduce_residual_rmsnorm(x, r[:2], w, EPS, regime="FP")
            out, ro = c.all_reduce_residual_rmsnorm(x, r, w, EPS, regime="FP")  # still in step
            return ro.tolist()
    results = run_threads(2, body)
    assert results[0] == results[1] == np.full((4, 64), 3.0, np.float16).tolist()
