"""Failures reach Python as exceptions, fast: a killed peer, an abort from the
context manager or by hand, a silent peer under QR_OP_TIMEOUT_MS. After a
failure the communicator stays failed (check, healthy) and closes without
raising; should_all_reduce answers as before the failure (a pure function of
the message), the call itself raises."""

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest

import quickreduce as qr
from harness import run_processes

_ctx = mp.get_context("fork")
X = np.ones(4096, np.float16)


def _survivor(group, ready, started, q):
    try:
        with qr.Communicator(group, 0, 2, timeout_ms=10000) as c:
            c.all_reduce(X, regime="FP")
            ready.set()
            started.set()
            try:
                c.all_reduce(X, regime="FP")  # rank 1 is killed while we wait
                q.put(("no error", None))
                return
            except qr.PeerFailed as e:
                t = time.monotonic()
                state = (c.healthy, c.should_all_reduce(X, regime="FP"))
                try:
                    c.check()
                    sticky = False
                except qr.PeerFailed:
                    sticky = True
                q.put(("PeerFailed", (t, str(e), state, sticky)))
    except BaseException as e:
        q.put((type(e).__name__ + ": " + str(e), None))


def _victim(group, ready):
    with qr.Communicator(group, 1, 2, timeout_ms=10000) as c:
        c.all_reduce(X, regime="FP")
        ready.wait(10)
        time.sleep(60)  # killed here


def test_killed_peer_is_peer_failed_within_a_second(group_name):
    q, ready, started = _ctx.Queue(), _ctx.Event(), _ctx.Event()
    survivor = _ctx.Process(target=_survivor, args=(group_name, ready, started, q))
    victim = _ctx.Process(target=_victim, args=(group_name, ready))
    survivor.start()
    victim.start()
    try:
        assert started.wait(20)
        time.sleep(0.2)  # the survivor is inside its all_reduce, waiting
        t_kill = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        what, detail = q.get(timeout=20)
    finally:
        for p in (survivor, victim):
            p.join(5)
            if p.is_alive():
                p.kill()
    assert what == "PeerFailed", what
    t, message, state, sticky = detail
    assert t - t_kill < 1.0, "PeerFailed after %.3f s" % (t - t_kill)
    assert state == (False, True)  # healthy, should_all_reduce (unchanged)
    assert sticky
    assert "rank 1" in message or "died" in message or "failed" in message, message


def _abort_rank(rank, group, how):
    if rank == 1:
        try:
            with qr.Communicator(group, 1, 2) as c:
                c.all_reduce(X, regime="FP")
                if how == "context":
                    raise RuntimeError("boom-1601")
                c.abort("by hand 1601")
                c.close()
        except RuntimeError:
            pass
        return None
    with qr.Communicator(group, 0, 2) as c:
        c.all_reduce(X, regime="FP")
        t0 = time.monotonic()
        with pytest.raises(qr.PeerFailed) as e:
            c.all_reduce(X, regime="FP")
        elapsed = time.monotonic() - t0
        return str(e.value), elapsed


@pytest.mark.parametrize("how, text", [("context", "boom-1601"), ("abort", "by hand 1601")])
def test_abort_reaches_the_peer_with_its_reason(group_name, how, text):
    message, elapsed = run_processes(2, _abort_rank, group_name, how)[0]
    assert text in message
    assert "RuntimeError" in message or how == "abort"
    assert elapsed < 1.0


def _silent(rank, group):
    with qr.Communicator(group, rank, 2) as c:
        if rank == 1:
            time.sleep(1.0)  # never calls; then sees the group failed
            with pytest.raises(qr.PeerFailed):
                c.check()
            return None
        t0 = time.monotonic()
        with pytest.raises(qr.Timeout):
            c.all_reduce(X, regime="FP")
        elapsed = time.monotonic() - t0
        with pytest.raises(qr.Timeout):
            c.check()
        return elapsed


def test_silent_peer_times_out_after_the_op_timeout(group_name):
    elapsed = run_processes(2, _silent, group_name, env={"QR_OP_TIMEOUT_MS": "300"})[0]
    assert 0.25 < elapsed < 1.5


def _eligibility(c):
    """should_all_reduce over sizes, dtypes, regimes and casts."""
    answers = []
    big = np.empty((1 << 30) + 8, np.uint16)  # 2 GiB + 16 bytes, never touched
    for n in (0, 4, 8, 4096, 1 << 19, 1 << 30, (1 << 30) + 8):
        for dt in ("float16", "bfloat16"):
            x = big[:n]
            answers.append(c.should_all_reduce(x, dtype=dt))
            for r in ("FP", "INT8", "INT6", "INT4", "INT3", "NONE"):
                for cast in (False, True):
                    answers.append(c.should_all_reduce(x, dtype=dt, regime=r,
                                                       cast_bf16_to_fp16=cast))
    return answers


def _idle_survivor(group, ready, killed, q):
    try:
        with qr.Communicator(group, 0, 2, timeout_ms=10000) as c:
            c.all_reduce(X, regime="FP")
            before = _eligibility(c)
            ready.set()
            killed.wait(20)
            time.sleep(0.3)  # the broker has raised the abort word; no call saw it yet
            while_aborted = _eligibility(c)
            try:
                c.all_reduce(X)
                q.put(("no error", None))
                return
            except qr.PeerFailed:
                pass
            q.put(("PeerFailed", (before, while_aborted, _eligibility(c))))
    except BaseException as e:
        q.put((type(e).__name__ + ": " + str(e), None))


def test_eligibility_is_unchanged_after_a_peer_dies_and_the_call_raises(group_name):
    """Survivors that answered differently after a death would send one
    all-reduce to different backends; the one on the other backend hangs."""
    q, ready, killed = _ctx.Queue(), _ctx.Event(), _ctx.Event()
    survivor = _ctx.Process(target=_idle_survivor, args=(group_name, ready, killed, q))
    victim = _ctx.Process(target=_victim, args=(group_name, ready))
    survivor.start()
    victim.start()
    try:
        assert ready.wait(20)
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(10)
        killed.set()
        what, detail = q.get(timeout=30)
    finally:
        for p in (survivor, victim):
            p.join(5)
            if p.is_alive():
                p.kill()
    assert what == "PeerFailed", what
    before, while_aborted, after = detail
    assert True in before and False in before  # the grid asks questions both ways
    assert while_aborted == before
    assert after == before
