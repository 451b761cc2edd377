"""The vLLM plugin against python/tests/fakes/vllm, stand-ins that follow
vLLM's own files (each fake names the repository, commit and path it
follows): CudaCommunicator's constructor, its all_reduce order, its
backend-selection line, destroy, suspend/resume and checkpoint hooks;
DeviceCommunicatorBase's rank_in_group and stateless groups; vllm.config's
PassConfig; init_logger. Ranks are processes on gloo; quickreduce runs on
its host backend, which stands in for the GPU."""

import logging
import os
import sys
import tempfile
import time

import pytest

torch = pytest.importorskip("torch")

import quickreduce as qr  # noqa: E402
from harness import run_processes  # noqa: E402

FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakes")
MiB = 1 << 20


def _gloo(rank, init_file, world_size=2):
    sys.path.insert(0, FAKES)
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world_size)
    return dist


def _records(level=None):
    from vllm.logger import RECORDS
    return [m for lv, m in RECORDS if level is None or lv == level]


def _vllm_rank(rank, init_file):
    dist = _gloo(rank, init_file)
    try:
        from quickreduce.integrations import vllm as qr_vllm
        from quickreduce.integrations._backend import QuickReduceBackend
        from vllm.config import (CompilationConfig, PassConfig, VllmConfig,
                                 set_current_vllm_config)
        from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
        qr_vllm.register()
        qr_vllm.register()  # idempotent
        w = dist.group.WORLD
        config = VllmConfig(CompilationConfig(PassConfig(fuse_allreduce_rms=True,
                                                            fuse_gemm_comms=True)))
        with set_current_vllm_config(config):
            tp = CudaCommunicator(w, torch.device("cpu"), device_group=w, unique_name="tp:0")
        pp = CudaCommunicator(w, torch.device("cpu"), device_group=w, unique_name="pp:0")
        out = {"pp": pp.qr_comm, "ours": isinstance(tp.qr_comm, QuickReduceBackend),
               "regime": tp.qr_comm.comm.config["regime"]}
        small = torch.full((64,), float(rank + 1), dtype=torch.float16)
        large = torch.full((1 << 19,), float(rank + 1), dtype=torch.float16)  # 1 MiB
        a = tp.all_reduce(small)
        out["small"] = (tp.taken_by, a[:2].tolist())
        b = tp.all_reduce(large)
        out["large"] = (tp.taken_by, b[:2].tolist())
        # Weakly contiguous (vLLM's is_weak_contiguous): a transposed matrix.
        base = (torch.arange(512 * 1024) % 97 + rank).to(torch.float16).view(512, 1024)
        t = base.t()
        want = ((torch.arange(512 * 1024) % 97) * 2 + 1).to(torch.float16).view(512, 1024).t()
        c = tp.all_reduce(t)
        out["transposed"] = (tp.taken_by, torch.equal(c, want), c.stride() == t.stride())
        out["log"] = _records()
        # Lifecycle: suspend/resume and checkpoint leave and join again.
        backend = tp.qr_comm
        tp.suspend()
        tp.all_reduce(large)
        lifecycle = [(tp.suspended, backend.comm is None, tp.taken_by)]
        tp.resume()
        lifecycle.append((tp.all_reduce(large)[0].item(), tp.taken_by))
        tp.checkpoint_prepare()
        tp.all_reduce(large)
        lifecycle.append(tp.taken_by)
        tp.checkpoint_restore()
        tp.all_reduce(large)
        lifecycle.append(tp.taken_by)
        tp.destroy()
        lifecycle.append((tp.qr_comm, backend.comm, backend.disabled))
        out["lifecycle"] = lifecycle
        return out
    finally:
        dist.destroy_process_group()


def test_vllm_plugin_serves_tp_groups_and_says_so():
    env = {"QR_VLLM": "1", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "INT8",
           "VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB": "1"}
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _vllm_rank, os.path.join(d, "init"), env=env, timeout=180)
    for r in results:
        assert r["pp"] is None and r["ours"]
        assert r["regime"] == "INT8"  # vLLM's variable, read as vLLM reads it
        assert r["small"] == ("torch", [3.0, 3.0])  # below the 1 MiB floor
        assert r["large"] == ("qr", [3.0, 3.0])  # 1 MiB runs one-shot: exact
        assert r["transposed"] == ("qr", True, True)
        # vLLM's own line, issued again after the install, names QUICK_REDUCE.
        assert any("Using ['QUICK_REDUCE'] all-reduce backends" in m and "'tp:0'" in m
                   for m in r["log"]), r["log"]
        warnings = [m for m in r["log"] if "around it" in m]
        # Async TP bypasses quickreduce; the FlashInfer fusion is served
        # (test_integrations_fused.py), so the warning leaves it out.
        assert len(warnings) == 1 and "fuse_gemm_comms" in warnings[0]
        assert "fuse_allreduce_rms" not in warnings[0]
        assert r["lifecycle"] == [(1, True, "torch"), (3.0, "qr"), "torch", "qr",
                                  (None, None, True)]


def _switch_rank(rank, init_file):
    dist = _gloo(rank, init_file)
    try:
        from quickreduce.integrations import vllm as qr_vllm
        from vllm.distributed import parallel_state
        from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
        qr_vllm.register()  # VLLM_PLUGINS names quickreduce
        parallel_state.set_custom_all_reduce(False)  # --disable-custom-all-reduce
        w = dist.group.WORLD
        off = CudaCommunicator(w, torch.device("cpu"), device_group=w, unique_name="tp:0")
        os.environ["QR_VLLM"] = "1"
        forced = CudaCommunicator(w, torch.device("cpu"), device_group=w, unique_name="tp:1")
        got = (off.qr_comm, forced.qr_comm is not None and not forced.qr_comm.disabled,
               [m for m in _records() if "overrides --disable-custom-all-reduce" in m])
        forced.destroy()
        return got
    finally:
        dist.destroy_process_group()


def test_vllm_disable_custom_all_reduce_is_honoured_unless_qr_vllm_is_1():
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _switch_rank, os.path.join(d, "init"),
                                env={"VLLM_PLUGINS": "quickreduce"}, timeout=120)
    for off, forced, said in results:
        assert off is None
        assert forced and len(said) == 1


def _native_rank(rank, init_file):
    dist = _gloo(rank, init_file)
    try:
        from quickreduce.integrations import vllm as qr_vllm
        from quickreduce.integrations._backend import QuickReduceBackend
        from vllm.distributed.device_communicators import cuda_communicator as cc
        qr_vllm.register()
        cc.IS_ROCM = True  # vLLM builds its native quick reduce first
        w = dist.group.WORLD
        taken = cc.CudaCommunicator(w, torch.device("cpu"), device_group=w, unique_name="tp:0")
        os.environ["QR_VLLM_KEEP_NATIVE"] = "1"
        kept = cc.CudaCommunicator(w, torch.device("cpu"), device_group=w, unique_name="tp:1")
        from vllm.distributed.device_communicators.quick_all_reduce import INSTANCES
        got = (isinstance(taken.qr_comm, QuickReduceBackend), INSTANCES[0].closed,
               kept.qr_comm is INSTANCES[1], INSTANCES[1].closed)
        taken.destroy()
        return got
    finally:
        dist.destroy_process_group()


def test_vllm_opted_in_takes_the_native_slot_unless_kept():
    """One policy on ROCm: once opted in, quickreduce takes the slot (the
    native one closed); QR_VLLM_KEEP_NATIVE=1 keeps vLLM's."""
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _native_rank, os.path.join(d, "init"),
                                env={"QR_VLLM": "1"}, timeout=120)
    assert results == [(True, True, True, False)] * 2


def test_vllm_own_quick_reduce_variable_does_not_install_quickreduce(monkeypatch, caplog):
    """Setting vLLM's VLLM_ROCM_QUICK_REDUCE_QUANTIZATION (meant for vLLM's
    native quick reduce) must not make the plugin replace it."""
    from quickreduce.integrations import vllm as qr_vllm
    for k in ("QR_VLLM", "VLLM_PLUGINS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "INT4")
    monkeypatch.setattr(qr_vllm, "_MODULE", "no_such_module_is_imported")
    monkeypatch.setattr(qr_vllm, "_installed", False)
    caplog.set_level(logging.INFO)
    assert not qr_vllm.enabled()
    qr_vllm.register()
    assert not qr_vllm._installed
    assert "CudaCommunicator not found" not in caplog.text  # it did not even look


def _stateless_rank(rank, store_file):
    sys.path.insert(0, FAKES)
    import datetime
    import torch.distributed as dist
    from quickreduce.integrations import vllm as qr_vllm
    from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
    # A gloo group torch.distributed has no record of, as vLLM's
    # stateless_init_torch_distributed_process_group makes for elastic EP.
    store = dist.FileStore(store_file, 2)
    pg = dist.ProcessGroupGloo(store, rank, 2, datetime.timedelta(seconds=60))
    qr_vllm.register()
    tp = CudaCommunicator(pg, torch.device("cpu"), unique_name="tp:0", global_ranks=[4, 5],
                          global_world_size=8)
    large = torch.full((1 << 19,), float(rank + 1), dtype=torch.float16)
    out = tp.all_reduce(large)
    got = (tp.rank_in_group, tp.taken_by, out[:2].tolist())
    tp.destroy()
    return got


def test_vllm_stateless_group_takes_rank_from_the_communicator():
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _stateless_rank, os.path.join(d, "store"),
                                env={"QR_VLLM": "1", "QR_MIN_SIZE_BYTES_MB": "1"}, timeout=120)
    assert results == [(0, "qr", [3.0, 3.0]), (1, "qr", [3.0, 3.0])]


def _failure_rank(rank, init_file):
    dist = _gloo(rank, init_file)
    try:
        from quickreduce.integrations import vllm as qr_vllm
        from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
        qr_vllm.register()
        w = dist.group.WORLD
        tp = CudaCommunicator(w, torch.device("cpu"), device_group=w, unique_name="tp:0")
        b = tp.qr_comm
        large = torch.full((1 << 19,), 1.0, dtype=torch.float16)
        before = b.should_quick_allreduce(large)
        dist.barrier()
        if rank == 1:
            b.comm.abort("rank 1 dies")
            dist.barrier()
            return before, None, None
        dist.barrier()
        deadline = time.monotonic() + 20
        while b.comm.healthy and time.monotonic() < deadline:
            time.sleep(0.01)
        after = b.should_quick_allreduce(large)
        try:
            b.quick_all_reduce(large)
            raised = None
        except qr.PeerFailed as e:
            raised = str(e)
        return before, after, raised
    finally:
        dist.destroy_process_group()


def test_eligibility_does_not_change_when_a_peer_fails_the_call_raises():
    """Every survivor must route the same tensor the same way: the answer is a
    function of the tensor, and the failure comes from the call."""
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _failure_rank, os.path.join(d, "init"),
                                env={"QR_VLLM": "1", "QR_MIN_SIZE_BYTES_MB": "1"}, timeout=120)
    before, after, raised = results[0]
    assert before and after
    assert raised and "rank 1 dies" in raised
    assert results[1][0]


def _invariant_rank(rank, init_file):
    dist = _gloo(rank, init_file)
    try:
        from quickreduce.integrations import vllm as qr_vllm
        from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
        qr_vllm.register()
        w = dist.group.WORLD
        tp = CudaCommunicator(w, torch.device("cpu"), device_group=w, unique_name="tp:0")
        g = torch.Generator().manual_seed(7 + rank)
        got = []
        for n in (1 << 15, 1 << 20):  # 64 KiB (under the 1 MiB floor), 2 MiB (two-shot)
            x = torch.randn(n, generator=g).to(torch.float16)
            peer = [torch.empty_like(x) for _ in range(2)]
            dist.all_gather(peer, x)
            exact = (peer[0].float() + peer[1].float()).to(torch.float16)
            y = tp.all_reduce(x)
            got.append((tp.taken_by, torch.equal(y, exact)))
        tp.destroy()
        return got
    finally:
        dist.destroy_process_group()


def test_batch_invariance_takes_every_size_in_fp():
    env = {"QR_VLLM": "1", "VLLM_BATCH_INVARIANT": "1", "QR_QUANTIZATION": "INT4",
           "QR_MIN_SIZE_BYTES_MB": "1", "QR_ONE_SHOT_MAX_KB": "0"}
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _invariant_rank, os.path.join(d, "init"), env=env,
                                timeout=120)
    for r in results:
        assert r == [("qr", True), ("qr", True)]


def _fp_rank(rank, group):
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(3 << 16, generator=g).to(torch.float16)  # 384 KiB
    with qr.Communicator(group, rank, 4) as c:
        y = c.all_reduce(x, regime="FP")
        return y.numpy().tobytes(), c.config["one_shot_ceiling_bytes"]["4"]


def test_one_shot_and_two_shot_fp_give_the_same_bits(group_name):
    """What batch invariance rests on: FP's result does not depend on which
    algorithm the size picks (four ranks, so the order of the sum matters)."""
    one = run_processes(4, _fp_rank, group_name + "a", env={"QR_ONE_SHOT_MAX_KB": "1024"})
    two = run_processes(4, _fp_rank, group_name + "b", env={"QR_ONE_SHOT_MAX_KB": "0"})
    assert one[0][1] == 1024 * 1024 and two[0][1] == 0
    assert all(r[0] == one[0][0] for r in one + two)
