"""The tensor-parallel example's other layouts (tp_layouts.py) on
quickreduce's host backend in FP, world size 2: the fused layer boundary
gives the unfused model's greedy tokens, the vocabulary-parallel head the
replicated head's logits exactly, the sequence-parallel prefill the
all-reduce model's logits and the unsharded model's argmax."""

import multiprocessing as mp
import os
import sys
import uuid

import numpy as np
import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tp_common  # noqa: E402
import tp_decoder  # noqa: E402
import tp_layouts  # noqa: E402

TINY = tp_common.DecoderConfig(**tp_common.PRESETS["tiny"])
WS = 2


def _child(q, rank, args):
    try:
        q.put((rank, True, tp_layouts.layouts_rank(rank, *args)))
    except BaseException as e:  # reported by the parent
        import traceback
        q.put((rank, False, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())))


def _run_ranks(args):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(q, r, args)) for r in range(WS)]
    for p in procs:
        p.start()
    results, errors = {}, []
    try:
        for _ in procs:
            rank, ok, value = q.get(timeout=300)
            (results.__setitem__(rank, value) if ok else errors.append(value))
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    assert not errors, "\n".join(errors)
    return [results[r] for r in range(WS)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    pytest.importorskip("quickreduce")
    path = tp_decoder.write_random_model(str(tmp_path_factory.mktemp("tiny")), TINY, seed=3)
    g = np.random.default_rng(5)
    prompts = [g.integers(0, TINY.vocab_size, 6).tolist() for _ in range(2)]
    stream = g.integers(0, TINY.vocab_size, 32).tolist()
    with tp_common.PrivateBroker() as broker:
        env = {"QR_BROKER_SOCKET": broker.socket, "QR_BROKER_AUTOSTART": "0"}
        results = _run_ranks((WS, path, "lay-" + uuid.uuid4().hex[:8], prompts, 24, stream,
                              env))
    return path, stream, results


def test_fused_boundaries_give_the_unfused_tokens(run):
    for r in run[2]:
        assert r["fused"] == r["plain"]
        assert len(r["plain"][0]) == 24


def test_vocabulary_parallel_head_equals_the_replicated_head(run):
    assert all(r["vocab_parallel_equal"] for r in run[2])


def test_sequence_parallel_prefill_equals_the_all_reduce_model(run):
    path, stream, results = run
    config, state = tp_decoder.load_config(path), tp_decoder.load_state_dict(path)
    unsharded = tp_decoder.TPDecoder(config, state, 0, 1, dtype=torch.float16, max_len=96)
    ref = tp_decoder.stream_logits(unsharded, stream).numpy()
    for r in results:
        np.testing.assert_array_equal(r["stream_seq"], r["stream_plain"])
        assert (r["stream_seq"].argmax(-1) == ref.argmax(-1)).all()
