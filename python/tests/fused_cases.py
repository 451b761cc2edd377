"""What the fused call's host tests (test_fused.py, test_fused_fp8.py) share:
the grid of calls, a call's keyword arguments, and the group runs that give
every rank's results, once per world size."""

import os

from harness import run_processes

WORLD_SIZES = (2, 4, 8)
ENV = {"QR_ONE_SHOT_MAX_KB": "64"}  # 32 x 1024 fp16 (64 KiB) is one-shot, larger is two-shot


def base_cases(ws):
    """(regime, dt, tokens, hidden) of every call at world size ws: the
    regimes it runs and the configured one (None), fp16 / bf16 with and
    without the cast, one-shot and two-shot sizes."""
    for regime in ["FP", "INT8", "INT4"] + (["INT3"] if ws == 2 else []) + [None]:
        for dt in ("fp16", "bf16", "bf16cast"):
            if regime is None and dt == "bf16cast":
                continue
            for tokens, hidden in ((1, 64), (32, 1024), (40, 1032)):
                yield regime, dt, tokens, hidden


def call_kwargs(case):
    """The dtype, regime and cast keywords of a case that starts (regime, dt)."""
    regime, dt = case[0], case[1]
    kw = {"dtype": "bfloat16" if dt.startswith("bf16") else "float16"}
    if regime is not None:
        kw["regime"] = regime
        kw["cast_bf16_to_fp16"] = dt == "bf16cast"
    return kw


class GroupRuns:
    """body(rank, ws, group, cases_for(ws)) on ws processes, run once per
    world size; calling it with ws gives every rank's result."""

    def __init__(self, prefix, body, cases_for):
        self._prefix, self._body, self._cases_for = prefix, body, cases_for
        self._results = {}

    def __call__(self, ws):
        if ws not in self._results:
            group = "%s-ws%d-%d" % (self._prefix, ws, os.getpid())
            self._results[ws] = run_processes(ws, self._body, ws, group, self._cases_for(ws),
                                              env=ENV, timeout=240)
        return self._results[ws]
