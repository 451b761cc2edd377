"""All-reduce on the host backend with ranks as processes, at world sizes 2, 4
and 8: every regime and dtype (bf16 with and without the fp16 cast), the
configured regime with its FP threshold, sizes around the one-shot ceiling
and small odd ones, in place and out of place. Every rank's result must equal
the library's host reference of the same call bit for bit (so all ranks agree)
and lie within the codec's error bound.

One group per world size runs all its cases (module fixture); each case is
then its own pytest case checking that call's digests."""

import hashlib
import os

import numpy as np
import pytest

import quickreduce as qr
from data import make_input
from harness import run_processes

WORLD_SIZES = (2, 4, 8)
# The configured path: INT8, but FP below 256 KiB.
BASE_ENV = {"QR_QUANTIZATION": "INT8", "QR_QUANTIZATION_MIN_SIZE_KB": "256"}
# The one-shot ceiling: built in at world size 8 (256 KiB); configured at 2
# and 4 (QR_ONE_SHOT_MAX_KB), where the built-in 4 MiB and 1 MiB would make
# the cases 16x and 4x the data (and the time on 2 cores) for no more
# coverage. Two-shot calls just above the ceiling so run INT8 at ws 2 and 8
# and FP at ws 4 when configured.
CEILING_KB = {2: "384", 4: "192"}
SEED = 1601


def group_env(ws):
    return dict(BASE_ENV, **({"QR_ONE_SHOT_MAX_KB": CEILING_KB[ws]} if ws in CEILING_KB else {}))


def _ceiling(ws):
    env = group_env(ws)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return qr.config()["one_shot_ceiling_bytes"][str(ws)]
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def cases_for(ws):
    ceiling = _ceiling(ws)
    regimes = ["FP", "INT8", "INT6", "INT4"] + (["INT3"] if ws == 2 else []) + [None]
    out = []
    for regime in regimes:
        for dt in ("fp16", "bf16", "bf16cast"):
            if regime is None and dt == "bf16cast":
                continue  # the configured call takes the configured cast
            # One-shot ignores the codec, so below the ceiling two regimes
            # suffice; at it and above it every regime runs.
            sizes = [16, 4112] + ([ceiling - 16] if regime in ("FP", None) else []) + \
                [ceiling, ceiling + 16]
            for nbytes in sizes:
                for inplace in ((False, True) if nbytes in (4112, ceiling + 16) else (False,)):
                    out.append((regime, dt, nbytes, inplace, "random"))
    for regime in ("FP", "INT8", "INT4"):
        for dt in ("fp16", "bf16"):
            out.append((regime, dt, 4112, False, "special"))
    return out


def case_id(c):
    regime, dt, nbytes, inplace, pattern = c
    return "%s-%s-%dB-%s%s" % (regime or "configured", dt, nbytes,
                               "inplace" if inplace else "outofplace",
                               "-special" if pattern == "special" else "")


def _call_args(case):
    regime, dt, _, _, _ = case
    kwargs = {"dtype": "bfloat16" if dt.startswith("bf16") else "float16"}
    if regime is not None:
        kwargs["regime"] = regime
        kwargs["cast_bf16_to_fp16"] = dt == "bf16cast"
    return kwargs


def _rank_body(rank, ws, group, cases):
    digests = []
    with qr.Communicator(group, rank, ws, timeout_ms=30000) as comm:
        for i, case in enumerate(cases):
            _, dt, nbytes, inplace, pattern = case
            x = make_input(dt[:4], nbytes, rank, SEED + i, pattern)
            before = x.copy()
            if inplace:
                y = comm.all_reduce(x, out=x, **_call_args(case))
                assert y is x
            else:
                y = comm.all_reduce(x, **_call_args(case))
                assert y is not x and np.array_equal(x.view(np.uint16), before.view(np.uint16))
            digests.append(hashlib.sha1(y.tobytes()).hexdigest())
    return digests


_results = {}


def _group_results(ws):
    if ws not in _results:
        cases = cases_for(ws)
        group = "pyhost-ws%d-%d" % (ws, os.getpid())
        _results[ws] = run_processes(ws, _rank_body, ws, group, cases, env=group_env(ws),
                                     timeout=240)
    return _results[ws]


ALL = [(ws, i, c) for ws in WORLD_SIZES for i, c in enumerate(cases_for(ws))]


@pytest.mark.parametrize("ws, index, case", ALL,
                         ids=["ws%d-%s" % (ws, case_id(c)) for ws, _, c in ALL])
def test_all_reduce_matches_reference(ws, index, case, monkeypatch):
    digests = [rank_digests[index] for rank_digests in _group_results(ws)]
    for k, v in group_env(ws).items():
        monkeypatch.setenv(k, v)
    _, dt, nbytes, _, pattern = case
    inputs = [make_input(dt[:4], nbytes, r, SEED + index, pattern) for r in range(ws)]
    kwargs = _call_args(case)
    ref = qr.reference_all_reduce(inputs, **kwargs)
    ref_digest = hashlib.sha1(ref.tobytes()).hexdigest()
    assert digests == [ref_digest] * ws, "ranks' results differ from the reference"
    ratio, violations = qr.check_bound(inputs, ref, **kwargs)
    assert violations == 0, "max error / bound %.3f" % ratio
    assert ratio <= 1.0
    if pattern == "random" and nbytes >= 4096:
        # The bound is tight enough that a quantized result comes near it and
        # an exact one does not err at all beyond one rounding.
        assert ratio > 0 or kwargs.get("regime") == "FP" or case[0] is None


def test_reference_is_not_the_identity():
    """The checks above would pass for a reference that returned rank 0's
    input if the group did the same: the reference must sum."""
    a = np.full(64, 1.5, np.float16)
    b = np.full(64, 2.25, np.float16)
    assert np.array_equal(qr.reference_all_reduce([a, b], "FP", False),
                          np.full(64, 3.75, np.float16))


@pytest.mark.parametrize("regime", ["FP", "INT8", "INT6", "INT4", "INT3"])
def test_error_bounds_are_the_bounds_check_bound_applies(regime):
    """qr.error_bounds gives, per element, the bound qr.check_bound divides by:
    the reference's own two-shot result stays inside it, and the largest
    error / bound agrees with check_bound's ratio."""
    os.environ["QR_ONE_SHOT_MAX_KB"] = "0"  # two-shot: the regime's codec applies
    try:
        inputs = [make_input("fp16", 8192, r, SEED, "random") for r in range(2)]
        bounds = qr.error_bounds(inputs, regime)
        assert bounds.dtype == np.float64 and bounds.shape == (4096,)
        assert np.all(bounds > 0)
        out = qr.reference_all_reduce(inputs, regime, False)
        exact = inputs[0].astype(np.float64) + inputs[1].astype(np.float64)
        err = np.abs(out.astype(np.float64) - exact)
        assert np.all(err <= bounds)
        ratio, violations = qr.check_bound(inputs, out, regime, False)
        assert violations == 0
        assert ratio == pytest.approx(float((err / bounds).max()), rel=1e-12)
    finally:
        del os.environ["QR_ONE_SHOT_MAX_KB"]


def test_error_bounds_need_a_codec():
    a = np.zeros(64, np.float16)
    with pytest.raises(qr.InvalidArgument, match="needs a regime"):
        qr.error_bounds([a, a], None)
    with pytest.raises(qr.InvalidArgument, match="names no codec"):
        qr.error_bounds([a, a], "NONE")
    b = a.copy()
    b[3] = np.inf
    assert np.isnan(qr.error_bounds([a, b], "INT4")[:32]).all()
    assert not np.isnan(qr.error_bounds([a, b], "INT4")[32:]).any()

