"""The SGLang adapter against python/tests/fakes/sglang, stand-ins that follow
SGLang's own files (each names the repository, commit and path it follows):
GroupCoordinator (constructor, all_reduce's order, graph_capture, destroy),
the plugin loader and its HookRegistry, server_args. Both ways in: the
sglang.srt.plugins entry point (an AFTER hook on GroupCoordinator.__init__),
and the .pth import hook for an SGLang without plugins. Ranks are processes
on gloo; quickreduce runs on its host backend, standing in for the GPU."""

import logging
import os
import shutil
import sys
import tempfile

import pytest

torch = pytest.importorskip("torch")

from harness import run_processes  # noqa: E402

FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakes")


def _site(root, plugins, entry_point):
    """A site directory with the fake SGLang (with or without its plugin
    system) and, if asked, quickreduce's entry point as an installed wheel
    declares it (an entry_points.txt that importlib.metadata finds)."""
    shutil.copytree(os.path.join(FAKES, "sglang"), os.path.join(root, "sglang"))
    if not plugins:
        shutil.rmtree(os.path.join(root, "sglang", "srt", "plugins"))
    if entry_point:
        info = os.path.join(root, "quickreduce_fake-0.1.0.dist-info")
        os.makedirs(info)
        with open(os.path.join(info, "METADATA"), "w") as f:
            f.write("Metadata-Version: 2.1\nName: quickreduce-fake\nVersion: 0.1.0\n")
        with open(os.path.join(info, "entry_points.txt"), "w") as f:
            f.write("[sglang.srt.plugins]\n"
                    "quickreduce = quickreduce.integrations.sglang:register\n")
    return root


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _start(rank, init_file, root):
    sys.path.insert(0, root)
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
    lines = _Lines()
    log = logging.getLogger("sglang.srt.distributed.quickreduce")
    log.addHandler(lines)
    log.setLevel(logging.INFO)
    return dist, lines


def _coordinator(ps, name, use_custom_allreduce=True):
    # GroupCoordinator(group_ranks, local_rank, torch_distributed_backend,
    # use_pynccl, use_pymscclpp, use_custom_allreduce,
    # use_torch_symm_mem_all_reduce, use_hpu/xpu/npu_communicator, ..., group_name)
    return ps.GroupCoordinator([[0, 1]], 0, "gloo", False, False, use_custom_allreduce, False,
                               False, False, False, group_name=name)


def _pth_rank(rank, init_file, root):
    dist, lines = _start(rank, init_file, root)
    try:
        from quickreduce.integrations import sglang as qr_sglang
        qr_sglang.arm()  # what the wheel's .pth line does when QR_SGLANG=1
        import sglang.srt.distributed.parallel_state as ps
        assert not qr_sglang.plugin_system_will_install()
        ps.CA_TAKES = True
        large = torch.full((1 << 19,), float(rank + 1), dtype=torch.float16)
        tp = _coordinator(ps, "tp")
        out = {"regime": tp.qr_comm.comm.config["regime"],
               "max": tp.qr_comm.comm.config["max_size_bytes"]}
        tp.all_reduce(large)
        out["first"] = tp.taken_by  # SGLang's order: custom all-reduce first
        attn = _coordinator(ps, "attention_tp")
        out["attention_tp"] = attn.qr_comm
        # QR_SGLANG_FIRST: custom all-reduce declines what quickreduce takes;
        # with symmetric memory on, that sends it to pynccl: a warning says so.
        os.environ["QR_SGLANG_FIRST"] = "1"
        ps.SYMM_MEM = True
        from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler
        set_global_server_args_for_scheduler(ServerArgs(enable_flashinfer_allreduce_fusion=True))
        tp2 = _coordinator(ps, "tp")
        ps.SYMM_MEM = False
        y = tp2.all_reduce(large)
        out["qr_first"] = (tp2.taken_by, y[:2].tolist())
        with tp2.graph_capture():  # no quick-reduce context, as in SGLang
            tp2.all_reduce(large)
        out["captured"] = tp2.taken_by
        backend = tp2.qr_comm
        tp2.destroy()
        out["destroyed"] = (tp2.qr_comm, backend.comm)
        out["warnings"] = [m for m in lines.lines if "around it" in m]
        tp.qr_comm.close()
        return out
    finally:
        dist.destroy_process_group()


def test_sglang_pth_hook_without_a_plugin_system():
    env = {"QR_SGLANG": "1", "ROCM_QUICK_REDUCE_QUANTIZATION": "INT4",
           "ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB": "0",  # SGLang: 2 GB
           "QR_MIN_SIZE_BYTES_MB": "1"}
    with tempfile.TemporaryDirectory() as d:
        root = _site(os.path.join(d, "site"), plugins=False, entry_point=False)
        results = run_processes(2, _pth_rank, os.path.join(d, "init"), root, env=env,
                                timeout=180)
    for r in results:
        assert r["regime"] == "INT4" and r["max"] == 2048 << 20
        assert r["first"] == "ca"
        assert r["attention_tp"] is None
        assert r["qr_first"] == ("qr", [3.0, 3.0])
        assert r["captured"] == "qr"
        assert r["destroyed"] == (None, None)
        assert len(r["warnings"]) == 1
        assert "--enable-symm-mem" in r["warnings"][0]
        # The FlashInfer fusion is served (test_integrations_fused.py).
        assert "--enable-flashinfer-allreduce-fusion" not in r["warnings"][0]


def _plugin_rank(rank, init_file, root):
    dist, lines = _start(rank, init_file, root)
    try:
        from quickreduce.integrations import sglang as qr_sglang
        os.environ["QR_SGLANG"] = "1"
        qr_sglang.arm()  # the .pth line: stands down, the plugin system installs
        del os.environ["QR_SGLANG"]
        from sglang.srt.plugins import load_plugins
        load_plugins()
        import sglang.srt.distributed.parallel_state as ps
        hooked = hasattr(ps.GroupCoordinator.__init__, "__wrapped__")
        pth_patched = getattr(ps.GroupCoordinator.__init__, "_quickreduce", False)
        off = _coordinator(ps, "tp", use_custom_allreduce=False)  # --disable-custom-all-reduce
        tp = _coordinator(ps, "tp")
        large = torch.full((1 << 19,), float(rank + 1), dtype=torch.float16)
        y = tp.all_reduce(large)
        got = {"will": qr_sglang.plugin_system_will_install(), "hooked": hooked,
               "pth": pth_patched, "off": off.qr_comm, "tp": (tp.taken_by, y[:2].tolist())}
        os.environ["QR_SGLANG"] = "1"
        forced = _coordinator(ps, "tp", use_custom_allreduce=False)
        got["forced"] = forced.qr_comm is not None
        got["said"] = [m for m in lines.lines if "QR_SGLANG=1 overrides" in m]
        backend = tp.qr_comm
        tp.destroy()
        got["closed"] = backend.comm is None
        forced.qr_comm.close()
        return got
    finally:
        dist.destroy_process_group()


def test_sglang_plugin_entry_point_hooks_group_coordinator():
    env = {"SGLANG_PLUGINS": "quickreduce", "QR_MIN_SIZE_BYTES_MB": "1"}
    with tempfile.TemporaryDirectory() as d:
        root = _site(os.path.join(d, "site"), plugins=True, entry_point=True)
        results = run_processes(2, _plugin_rank, os.path.join(d, "init"), root, env=env,
                                timeout=180)
    for r in results:
        assert r["will"] and r["hooked"] and not r["pth"]
        assert r["off"] is None
        assert r["tp"] == ("qr", [3.0, 3.0])
        assert r["forced"] and len(r["said"]) == 1
        assert r["closed"]


def test_sglang_arm_does_nothing_unless_asked(monkeypatch):
    from quickreduce.integrations import sglang as qr_sglang
    monkeypatch.delenv("QR_SGLANG", raising=False)
    before = list(sys.meta_path)
    qr_sglang.arm()
    assert sys.meta_path == before
