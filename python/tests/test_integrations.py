"""The vLLM plugin and the SGLang patch against small fakes of the classes
they patch (neither stack is installed here): the engine's dispatch finds
quickreduce in its qr_comm slot and gets correct sums from it, small tensors
still take the engine's own path, non-TP groups are left alone, a setup
quickreduce cannot serve disables it without raising, and the environment
variables of each stack are honoured."""

import os
import sys
import tempfile
import textwrap
import types

import pytest

torch = pytest.importorskip("torch")

import quickreduce as qr  # noqa: E402
from quickreduce.integrations import sglang as qr_sglang  # noqa: E402
from quickreduce.integrations import vllm as qr_vllm  # noqa: E402
from harness import run_processes  # noqa: E402

FAKE_ENGINE = '''
import torch
import torch.distributed as dist


class {cls}:
    """What the adapter relies on: the constructor's arguments and the
    attributes it sets, and an all-reduce that asks qr_comm first."""

    def __init__(self, cpu_group, device=None, device_group=None, unique_name=""):
        self.cpu_group = cpu_group
        self.device = device
        self.unique_name = unique_name
        self.world_size = dist.get_world_size(cpu_group)
        self.qr_comm = None
        self.ca_comm = self.make_custom_all_reduce()

    def make_custom_all_reduce(self):
        return None

    def all_reduce(self, t):
        qr_comm = self.qr_comm
        if self.ca_comm is not None and self.ca_comm.should_custom_ar(t):
            return t.clone(), "ca"
        if qr_comm is not None and not qr_comm.disabled and qr_comm.should_quick_allreduce(t):
            return qr_comm.quick_all_reduce(t), "qr"
        out = t.clone()
        dist.all_reduce(out, group=self.cpu_group)
        return out, "engine"
'''


def _fake_vllm():
    names = ["vllm", "vllm.distributed", "vllm.distributed.device_communicators",
             qr_vllm._MODULE]
    for n in names:
        sys.modules[n] = types.ModuleType(n)
    exec(FAKE_ENGINE.format(cls="CudaCommunicator"), sys.modules[qr_vllm._MODULE].__dict__)
    return sys.modules[qr_vllm._MODULE].CudaCommunicator


def _fake_sglang_on_disk(root):
    pkg = os.path.join(root, "sglang", "srt", "distributed")
    os.makedirs(pkg)
    for d in ("sglang", "sglang/srt", "sglang/srt/distributed"):
        open(os.path.join(root, d, "__init__.py"), "w").close()
    with open(os.path.join(pkg, "parallel_state.py"), "w") as f:
        f.write(textwrap.dedent(FAKE_ENGINE.format(cls="GroupCoordinator")))


def _gloo(rank, init_file):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
    return dist


def _vllm_rank(rank, init_file):
    dist = _gloo(rank, init_file)
    try:
        cls = _fake_vllm()
        qr_vllm.register()
        qr_vllm.register()  # idempotent
        assert cls.__init__._quickreduce
        tp = cls(dist.group.WORLD, torch.device("cpu"), unique_name="tp:0")
        pp = cls(dist.group.WORLD, torch.device("cpu"), unique_name="pp:0")
        assert pp.qr_comm is None
        assert tp.qr_comm is not None and not tp.qr_comm.disabled
        small = torch.full((64,), float(rank + 1), dtype=torch.float16)
        large = torch.full((1 << 19,), float(rank + 1), dtype=torch.float16)  # 1 MiB
        a, how_a = tp.all_reduce(small)
        b, how_b = tp.all_reduce(large)
        regime = tp.qr_comm.comm.config["regime"]
        bad = cls(dist.group.WORLD, torch.device("meta"), unique_name="tp:1")  # cannot serve
        tp.qr_comm.close()
        return how_a, how_b, a[:2].tolist(), b[:2].tolist(), regime, bad.qr_comm
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("env", [
    {"QR_QUANTIZATION": "FP", "QR_MIN_SIZE_BYTES_MB": "1"},
    # vLLM's names alone: the plugin turns on and the library reads them.
    {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "INT8",
     "VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB": "1"},
], ids=["qr-env", "vllm-env"])
def test_vllm_plugin_installs_quickreduce_for_tp_groups(env):
    with tempfile.TemporaryDirectory() as d:
        results = run_processes(2, _vllm_rank, os.path.join(d, "init"), env=env, timeout=120)
    want_regime = "FP" if "QR_QUANTIZATION" in env else "INT8"
    for how_a, how_b, a, b, regime, bad in results:
        assert (how_a, how_b) == ("engine", "qr")
        assert a == [3.0, 3.0] and b == [3.0, 3.0]  # 1 + 2 (1 MiB runs one-shot: exact)
        assert regime == want_regime
        assert bad is None


def test_vllm_plugin_is_opt_in(monkeypatch):
    for k in ("QR_VLLM", "QR_QUANTIZATION", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION"):
        monkeypatch.delenv(k, raising=False)
    assert not qr_vllm.enabled()
    monkeypatch.setenv("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "NONE")
    assert not qr_vllm.enabled()
    monkeypatch.setenv("QR_VLLM", "1")
    assert qr_vllm.enabled()


def test_vllm_plugin_without_vllm_only_warns(monkeypatch, caplog):
    monkeypatch.setenv("QR_VLLM", "1")
    monkeypatch.setattr(qr_vllm, "_MODULE", "no_such_vllm.cuda_communicator")
    monkeypatch.setattr(qr_vllm, "_installed", False)
    qr_vllm.register()
    assert not qr_vllm._installed
    assert "plugin inactive" in caplog.text


class _CustomAllReduce:
    """SGLang's custom all-reduce takes everything in this fake."""

    def should_custom_ar(self, t):
        return True


def _sglang_rank(rank, init_file, root):
    dist = _gloo(rank, init_file)
    try:
        sys.path.insert(0, root)
        qr_sglang.arm()  # before SGLang is imported, as the .pth file does
        import sglang.srt.distributed.parallel_state as ps
        cls = ps.GroupCoordinator
        assert cls.__init__._quickreduce
        qr_sglang.install(cls)  # idempotent
        cls.make_custom_all_reduce = lambda self: _CustomAllReduce()
        large = torch.full((1 << 19,), float(rank + 1), dtype=torch.float16)
        tp = cls(dist.group.WORLD, torch.device("cpu"), unique_name="tp:0")
        first = tp.all_reduce(large)[1]  # SGLang's order: custom all-reduce first
        regime = tp.qr_comm.comm.config["regime"]
        tp.qr_comm.close()
        # QR_SGLANG_FIRST: custom all-reduce declines what quickreduce takes.
        os.environ["QR_SGLANG_FIRST"] = "1"
        cls.__init__ = cls.__init__.__wrapped__
        qr_sglang.install(cls)
        tp2 = cls(dist.group.WORLD, torch.device("cpu"), unique_name="tp:1")
        out, how = tp2.all_reduce(large)
        tp2.qr_comm.close()
        return first, how, out[:2].tolist(), regime, os.environ.get("QR_QUANTIZATION")
    finally:
        dist.destroy_process_group()


def test_sglang_patch_arms_on_import_and_honours_its_env():
    env = {"QR_SGLANG": "1", "ROCM_QUICK_REDUCE_QUANTIZATION": "INT4",
           "QR_MIN_SIZE_BYTES_MB": "1"}
    with tempfile.TemporaryDirectory() as d:
        root = os.path.join(d, "site")
        _fake_sglang_on_disk(root)
        results = run_processes(2, _sglang_rank, os.path.join(d, "init"), root, env=env,
                                timeout=120)
    for first, how, out, regime, qr_env in results:
        assert first == "ca"
        assert (how, out) == ("qr", [3.0, 3.0])
        assert regime == "INT4" and qr_env == "INT4"  # from ROCM_QUICK_REDUCE_QUANTIZATION


def test_sglang_arm_does_nothing_unless_asked(monkeypatch):
    monkeypatch.delenv("QR_SGLANG", raising=False)
    before = list(sys.meta_path)
    qr_sglang.arm()
    assert sys.meta_path == before
