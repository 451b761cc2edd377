"""Bad input raises InvalidArgument before anything is sent: a group whose
ranks all refuse the same bad calls still runs good ones afterwards, bit for
bit. should_all_reduce says no for the same inputs without raising."""

import numpy as np
import pytest

import quickreduce as qr
from harness import run_threads


def _aligned(n, dtype=np.float16, offset=0):
    raw = np.zeros(n * 2 + 64 + offset, np.uint8)
    start = (-raw.ctypes.data) % 16 + offset
    return raw[start:start + n * 2].view(dtype)


BAD = {
    "float32": lambda: np.zeros(64, np.float32),
    "int16 without dtype": lambda: np.zeros(64, np.int16),
    "not contiguous": lambda: np.zeros(128, np.float16)[::2],
    "misaligned": lambda: _aligned(64, offset=2),
    "size not a multiple of 16 bytes": lambda: np.zeros(12, np.float16),
    "a list": lambda: [1.0] * 64,
}

MATCH = {"float32": "float16 and bfloat16", "int16 without dtype": "float16 and bfloat16",
         "not contiguous": "contiguous", "misaligned": "aligned",
         "size not a multiple of 16 bytes": "multiple of 16", "a list": "NumPy array"}


def _body(rank, group, ws):
    with qr.Communicator(group, rank, ws) as c:
        for name, make in BAD.items():
            x = make()
            if not isinstance(x, list):
                assert not c.should_all_reduce(x, regime="FP"), name
            with pytest.raises(qr.InvalidArgument, match=MATCH[name]):
                c.all_reduce(x, regime="FP")
        good = np.full(64, rank + 1, np.float16)
        with pytest.raises(qr.InvalidArgument, match="does not match"):
            c.all_reduce(good, out=np.zeros(32, np.float16), regime="FP")
        with pytest.raises(qr.InvalidArgument, match="out has dtype uint16"):
            c.all_reduce(good, out=np.zeros(64, np.uint16), regime="FP")
        with pytest.raises(qr.InvalidArgument, match="out"):
            c.all_reduce(good, out=_aligned(64, offset=2), regime="FP")
        with pytest.raises(qr.InvalidArgument, match="16-bit"):
            c.all_reduce(np.zeros(64, np.float32), dtype="bfloat16")
        with pytest.raises(qr.InvalidArgument, match="regime"):
            c.all_reduce(good, regime="INT5")
        with pytest.raises(qr.InvalidArgument, match="bfloat16"):
            c.all_reduce(good, dtype="float32")
        # Errors the library finds: the configured regime is NONE here.
        with pytest.raises(qr.Unsupported, match="NONE"):
            c.all_reduce(good)
        if ws != 2:
            with pytest.raises(qr.Unsupported, match="INT3"):
                c.all_reduce(good, regime="INT3")
        # An empty message is a no-op.
        empty = np.zeros(0, np.float16)
        assert c.all_reduce(empty, regime="FP").size == 0
        # The group is still healthy and in step.
        assert c.healthy
        y = c.all_reduce(good, regime="FP")
        return y.tolist()


@pytest.mark.parametrize("ws", [2, 4])
def test_bad_input_is_refused_and_the_group_goes_on(group_name, ws, monkeypatch):
    monkeypatch.setenv("QR_QUANTIZATION", "NONE")
    results = run_threads(ws, _body, group_name, ws)
    expected = float(sum(range(1, ws + 1)))
    assert results == [[expected] * 64] * ws


def _should(rank, group):
    with qr.Communicator(group, rank, 2) as c:
        x = np.zeros(1 << 20, np.float16)   # 2 MiB: between the floor and the maximum
        small = np.zeros(64, np.float16)
        out = {
            "configured": c.should_all_reduce(x),
            "FP": c.should_all_reduce(x, regime="FP"),
            "NONE": c.should_all_reduce(x, regime="NONE"),
            "small FP": c.should_all_reduce(small, regime="FP"),
            "bf16 bits": c.should_all_reduce(x.view(np.uint16), regime="FP", dtype="bf16"),
            "INT3": c.should_all_reduce(x, regime="INT3"),
            "too big": c.should_all_reduce(np.zeros(3 << 20, np.float16), regime="FP"),
        }
        return out


def test_should_all_reduce_follows_the_policy(group_name, monkeypatch):
    monkeypatch.setenv("QR_QUANTIZATION", "INT4")
    monkeypatch.setenv("QR_MIN_SIZE_BYTES_MB", "1")
    monkeypatch.setenv("QR_MAX_SIZE_BYTES_MB", "4")
    r = run_threads(2, _should, group_name)[0]
    assert r == {"configured": True, "FP": True, "NONE": False, "small FP": False,
                 "bf16 bits": True, "INT3": True, "too big": False}
