"""Ranks as processes or threads, each running fn(rank, *args); results come
back in rank order, and a rank's exception is re-raised in the caller."""

import multiprocessing as mp
import sys
import threading
import traceback


def _context():
    # A forked child inherits torch's intra-op and OpenMP thread pools without
    # their threads: the first parallel op in it can wait forever on a lock
    # held at fork time (seen with torch 2.11: torch.compile in the child
    # stalled after the parent had run other torch cases). Once torch is
    # loaded, ranks fork from a server process that imported torch but never
    # ran an op (one torch import per test process, not one per rank); before
    # that, a plain fork is safe.
    if "torch" not in sys.modules:
        return mp.get_context("fork")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "quickreduce"])
    return ctx


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
    """Runs fn(rank, *args) in world_size processes; returns the results. fn
    and args must be picklable (a module-level function) when torch is loaded,
    since the ranks then start from a fork server."""
    ctx = _context()
    q = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(fn, r, args, env, q)) for r in range(world_size)]
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
