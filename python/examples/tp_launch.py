"""Starts the tensor-parallel example's ranks: a private broker for the run,
one process per rank (forked on the host backend, a fresh `tp_run.py
--worker` interpreter with GPUs), a deadline for them all, and their
worker<rank>.json results."""

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time

import tp_common
import tp_worker

TP_RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tp_run.py")


def _forked_worker(args, env):
    os.environ.clear()
    os.environ.update(env)
    tp_worker.worker(args)


def _start_rank(args, model_path, out, rank, env):
    """Rank `rank`'s process. On the host backend it is forked from this one
    (torch is imported once, not once per rank: on two CPU cores that is most
    of a small run); with GPUs it is a fresh interpreter (CUDA and fork do
    not mix). Returns (wait(timeout) -> exit code or None, kill)."""
    if args.device == "host":
        wargs = argparse.Namespace(**vars(args))
        wargs.worker, wargs.rank, wargs.model, wargs.out = True, rank, model_path, out
        p = multiprocessing.get_context("fork").Process(target=_forked_worker, args=(wargs, env))
        p.start()
        return lambda timeout: (p.join(timeout), p.exitcode)[1], p.kill
    cmd = [sys.executable, TP_RUN, "--worker", "--model", model_path,
           "--out", out, "--world-size", str(args.world_size), "--device", args.device,
           "--rank", str(rank)]
    p = subprocess.Popen(cmd, env=env)

    def wait(timeout):
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    return wait, p.kill


def run_workers(args, model_path, out):
    """One process per rank; returns their results (dicts by regime/dtype)."""
    env = dict(os.environ)
    with tp_common.PrivateBroker() as broker:
        env.update(QR_BROKER_SOCKET=broker.socket, QR_BROKER_AUTOSTART="0")
        ranks = [_start_rank(args, model_path, out, r, env) for r in range(args.world_size)]
        deadline = time.time() + args.timeout
        codes = [wait(max(1, deadline - time.time())) for wait, _ in ranks]
        if None in codes:
            for _, kill in ranks:
                kill()
            raise SystemExit(f"workers did not finish within {args.timeout} s")
    if any(codes):
        raise SystemExit(f"worker exit codes {codes}")
    return [json.load(open(os.path.join(out, f"worker{r}.json")))
            for r in range(args.world_size)]
