"""Ranks as processes (fork) or threads, each running fn(rank, *args); results
come back in rank order, and a rank's exception is re-raised in the caller."""

import multiprocessing as mp
import threading
import traceback

_ctx = mp.get_context("fork")


def _child(fn, rank, args, env, q):
    import os
    os.environ.update(env or {})
    try:
        q.put((rank, True, fn(rank, *args)))
    except BaseException as e:  # report everything, including test assertions
        q.put((rank, False, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())))


class RankFailed(AssertionError):
    pass


def run_processes(world_size, fn, *args, env=None, timeout=120.0):
    """Runs fn(rank, *args) in world_size forked processes; returns the results."""
    q = _ctx.Queue()
    procs = [_ctx.Process(target=_child, args=(fn, r, args, env, q)) for r in range(world_size)]
    for p in procs:
        p.start()
    results, errors = {}, []
    try:
        for _ in procs:
            rank, ok, value = q.get(timeout=timeout)
            if ok:
                results[rank] = value
            else:
                errors.append("rank %d: %s" % (rank, value))
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    if errors:
        raise RankFailed("\n".join(errors))
    return [results[r] for r in range(world_size)]


def run_threads(world_size, fn, *args, timeout=120.0):
    """Runs fn(rank, *args) in world_size threads of this process."""
    results, errors = [None] * world_size, []

    def body(rank):
        try:
            results[rank] = fn(rank, *args)
        except BaseException as e:
            errors.append("rank %d: %s: %s\n%s" % (rank, type(e).__name__, e,
                                                   traceback.format_exc()))

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        if t.is_alive():
            raise RankFailed("a rank thread did not finish within %.0f s" % timeout)
    if errors:
        raise RankFailed("\n".join(errors))
    return results
