"""Communicator.all_reduce_residual_rmsnorm_fp8 on the host backend with ranks
as processes, at world sizes 2, 4 and 8 (docs/fused.md): the cases of
test_fused.py (regimes, fp16 / bf16 with and without the cast, the
configured regime, one-shot and two-shot sizes, the in-place layouts, no
residual) and special values, with scales that leave values subnormal and
that saturate. Every rank's three outputs must equal the library's host
reference of the same call bit for bit; out and residual_out must be those of
all_reduce_residual_rmsnorm, and quant_out an e4m3fn encoding of out * (1 /
scale) computed here apart from the library (tests/e4m3.py). Invalid
arguments raise InvalidArgument before anything is sent."""

import hashlib

import numpy as np
import pytest

import e4m3
import quickreduce as qr
from data import make_input
from fused_cases import ENV, WORLD_SIZES, GroupRuns, base_cases
from fused_cases import call_kwargs as _kwargs
from harness import run_threads

EPS = 1e-5
SEED = 2807
# 1: most values normal; 0.02: many saturate; 64: many subnormal or 0.
SCALES = (1.0, 0.02, 64.0)


def cases_for(ws):
    """base_cases, each with its buffer layout, scale and data, then special
    values."""
    out = [c + (n % 4, SCALES[n % len(SCALES)], "random") for n, c in enumerate(base_cases(ws))]
    for dt in ("fp16", "bf16"):
        out.append(("FP", dt, 32, 1024, 0, 0.5, "special"))
    return out


def _id(ws, c):
    return "ws%d-%s-%s-%dx%d-l%d-s%g-%s" % ((ws, c[0] or "configured") + c[1:])


def _data(case, i, who):
    _, dt, tokens, hidden, _, _, pattern = case
    return make_input(dt[:4], tokens * hidden * 2, who, SEED + i,
                      pattern if who < 100 else "random").reshape(tokens, hidden)


def _weight(case, i):
    _, dt, _, hidden, _, _, _ = case
    return make_input(dt[:4], hidden * 2, 99, SEED + i)


def _scale(case):
    return np.array([case[5]], dtype=np.float32)


def _digest(*arrays):
    return tuple(hashlib.sha1(a.tobytes()).hexdigest() for a in arrays)


def _rank_body(rank, ws, group, cases):
    digests = []
    with qr.Communicator(group, rank, ws, timeout_ms=30000) as comm:
        for i, case in enumerate(cases):
            layout = case[4]
            x, residual, w = _data(case, i, rank), _data(case, i, 100), _weight(case, i)
            scale = _scale(case)
            if layout == 0:    # new outputs
                q, out, ro = comm.all_reduce_residual_rmsnorm_fp8(x, residual, w, EPS, scale,
                                                                  **_kwargs(case))
            elif layout == 1:  # vLLM's: the residual in place, the norm over the input
                given = np.empty(x.shape, np.uint8)
                q, out, ro = comm.all_reduce_residual_rmsnorm_fp8(
                    x, residual, w, EPS, scale, out=x, residual_out=residual, quant_out=given,
                    **_kwargs(case))
                assert q is given and out is x and ro is residual
            elif layout == 2:  # residual_out over the input
                q, out, ro = comm.all_reduce_residual_rmsnorm_fp8(x, residual, w, EPS, scale,
                                                                  residual_out=x,
                                                                  **_kwargs(case))
                assert ro is x
            else:              # no residual
                q, out, ro = comm.all_reduce_residual_rmsnorm_fp8(x, None, w, EPS, scale,
                                                                  **_kwargs(case))
            assert q.dtype == np.uint8 and q.shape == x.shape
            digests.append(_digest(q, out, ro))
    return digests


_group_results = GroupRuns("pyfp8", _rank_body, cases_for)


ALL = [(ws, i, c) for ws in WORLD_SIZES for i, c in enumerate(cases_for(ws))]


@pytest.mark.parametrize("ws, index, case", ALL, ids=[_id(ws, c) for ws, _, c in ALL])
def test_fused_fp8_matches_reference(ws, index, case, monkeypatch):
    digests = [rank[index] for rank in _group_results(ws)]
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    inputs = [_data(case, index, r) for r in range(ws)]
    residual = None if case[4] == 3 else _data(case, index, 100)
    w = _weight(case, index)
    q, out, ro = qr.reference_all_reduce_residual_rmsnorm_fp8(inputs, residual, w, EPS,
                                                              _scale(case), **_kwargs(case))
    assert q.dtype == np.uint8 and q.shape == inputs[0].shape
    assert digests == [_digest(q, out, ro)] * ws, "ranks' results differ from the reference"
    # The norm and the residual are the unquantized call's, bit for bit.
    plain_out, plain_ro = qr.reference_all_reduce_residual_rmsnorm(inputs, residual, w, EPS,
                                                                   **_kwargs(case))
    assert np.array_equal(out.view(np.uint16), plain_out.view(np.uint16))
    assert np.array_equal(ro.view(np.uint16), plain_ro.view(np.uint16))
    # quant_out is out * (1 / scale) in fp32, to the nearest e4m3fn code.
    want = e4m3.quantize(e4m3.as_float32(out, case[1][:4]), case[5])
    assert np.array_equal(q, want), "%d of %d codes differ" % ((q != want).sum(), q.size)
    # The scales chosen reach the format's corners.
    if case[6] == "special":
        assert (q == 0x7F).any()
    elif case[5] == 0.02 and case[2] > 1:
        assert (q & 0x7F == 0x7E).any()
    elif case[5] == 64.0 and case[2] > 1:
        assert ((q & 0x78) == 0).any()


def test_reference_takes_the_scale_as_a_number_or_one_float32(monkeypatch):
    inputs = [np.full((2, 64), v, np.float16) for v in (0.5, 1.5)]
    w = np.ones(64, np.float16)
    q, out, ro = qr.reference_all_reduce_residual_rmsnorm_fp8(inputs, None, w, EPS, 0.5,
                                                              regime="FP")
    assert out.tolist() == np.ones((2, 64), np.float16).tolist()
    assert ro.tolist() == np.full((2, 64), 2.0, np.float16).tolist()
    assert (q == 0x40).all()  # 1 / 0.5 = 2.0: exponent field 8, mantissa 0
    for scale in (np.float32(0.5), np.array([[0.5]], np.float32)):
        q2, _, _ = qr.reference_all_reduce_residual_rmsnorm_fp8(inputs, None, w, EPS, scale,
                                                                regime="FP")
        assert np.array_equal(q, q2)
    for scale, match in ((None, "scale is missing"),
                         (np.array([0.5, 0.5], np.float32), "one float32"),
                         (np.array([0.5]), "one float32")):
        with pytest.raises(qr.InvalidArgument, match=match):
            qr.reference_all_reduce_residual_rmsnorm_fp8(inputs, None, w, EPS, scale,
                                                         regime="FP")


def test_invalid_arguments_raise_before_anything_runs(group_name):
    def body(rank):
        with qr.Communicator(group_name, rank, 2) as c:
            x = np.ones((4, 64), np.float16)
            r = np.ones((4, 64), np.float16)
            w = np.ones(64, np.float16)
            s = np.array([0.5], np.float32)
            raw = np.empty(256 + 32, np.uint8)
            off = (-raw.ctypes.data) % 16 + 1
            misaligned = raw[off:off + 256]
            bad = [
                ({"scale": None}, "scale is missing"),
                ({"scale": np.array([0.5, 0.5], np.float32)}, "one float32 value, not 8 bytes"),
                ({"scale": np.array([0.5], np.float64)}, "one float32 value, not 8 bytes"),
                ({"scale": 0.5}, "scale must be a NumPy array or a torch tensor"),
                ({"quant_out": np.empty((4, 64), np.float16)}, "quant_out has dtype float16"),
                ({"quant_out": np.empty((4, 64), np.bool_)}, "quant_out has dtype bool"),
                ({"quant_out": np.empty(248, np.uint8)}, "quant_out holds 248 values; the "
                                                         "input 256"),
                ({"quant_out": np.empty((64, 4), np.uint8).T}, "quant_out is not contiguous"),
                ({"out": r}, "overlap"),                    # the norm over the residual
                ({"quant_out": x.view(np.uint8).reshape(-1)[:256]}, None),  # over the input
                ({"quant_out": misaligned}, None),
            ]
            for kw, match in bad:
                args = {"scale": s}
                args.update(kw)
                scale = args.pop("scale")
                with pytest.raises(qr.InvalidArgument, match=match):
                    c.all_reduce_residual_rmsnorm_fp8(x, r, w, EPS, scale, regime="FP", **args)
            # Still in step, and the results as they should be: residual 3, the
            # norm 1, quant 1 / 0.5 = 2.0 (code 0x40).
            q, out, ro = c.all_reduce_residual_rmsnorm_fp8(x, r, w, EPS, s, regime="FP")
            return q.tolist(), out.tolist(), ro.tolist()
    for q, out, ro in run_threads(2, body):
        assert q == np.full((4, 64), 0x40, np.uint8).tolist()
        assert out == np.ones((4, 64), np.float16).tolist()
        assert ro == np.full((4, 64), 3.0, np.float16).tolist()
