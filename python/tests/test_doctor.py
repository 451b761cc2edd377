"""`python -m quickreduce doctor` on the host backend: the whole command on
this machine (a real two-rank all-reduce, exit 0), the library's /dev/shm
needs against what a real group creates there, and every failing branch
(small or full /dev/shm, a socket directory owned by another uid, with loose
modes or a symlink, a driver older than the library, GPUs without peer
access, a stack that will not load the plugin or routes all-reduces around
quickreduce, a failed all-reduce), each with exit 1 and a remedy line.

The stacks' rules mirrored here are cited in quickreduce/stack_info.py:
vllm-project/vllm@01425553 vllm/plugins/__init__.py (VLLM_PLUGINS),
vllm-project/vllm@002284db vllm/config/compilation.py (PassConfig),
sgl-project/sglang@32c764af python/sglang/srt/plugins/__init__.py
(SGLANG_PLUGINS), sgl-project/sglang@469c63e5 python/sglang/srt/server_args.py."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import quickreduce as qr
from quickreduce import _lib, doctor, doctor_checks, stack_info
from harness import run_processes

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(qr.__file__)))


def _doctor(args, env=None, extra_path=None):
    e = dict(os.environ)
    e.update(env or {})
    e["PYTHONPATH"] = os.pathsep.join([p for p in (extra_path, _PACKAGE_PARENT) if p])
    return subprocess.run([sys.executable, "-m", "quickreduce", "doctor"] + args, env=e,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)


def _statvfs(total_mib, free_mib):
    return lambda path: SimpleNamespace(f_blocks=total_mib * 256, f_bavail=free_mib * 256,
                                        f_frsize=4096)


def _by_check(findings, name):
    return [f for f in findings if f["check"] == name]


# --- the whole command ---

def test_doctor_on_this_machine_is_well_and_runs_a_real_all_reduce():
    r = _doctor(["--json"])
    report = json.loads(r.stdout.decode())
    problems = [f for f in report["findings"] if f["status"] == "problem"]
    assert r.returncode == 0, (problems, r.stderr.decode()[-2000:])
    assert report["ok"]
    host = _by_check(report["findings"], "allreduce-host")
    assert host and host[0]["status"] == "ok", host
    assert _by_check(report["findings"], "library")[0]["status"] == "ok"
    text = _doctor(["--skip-allreduce"])
    assert text.returncode == 0
    assert b"all is well" in text.stdout


def test_bad_usage_is_exit_2():
    assert _doctor(["--no-such-flag"]).returncode == 2
    assert _doctor(["--vllm-config", "not json"]).returncode == 2
    assert _doctor(["--sglang-config", "[1]"]).returncode == 2


# --- /dev/shm ---

def _shm_census(rank, group):
    """Rank 0 sums the sizes of the group's objects in /dev/shm while both
    ranks are joined (the second all-reduce keeps rank 1 from leaving)."""
    x = np.ones(8, np.float16)
    with qr.Communicator(group, rank, 2) as c:
        c.all_reduce(x)
        total = None
        if rank == 0:
            names = [n for n in os.listdir("/dev/shm") if "-%s-" % group in n]
            total = sum(os.stat(os.path.join("/dev/shm", n)).st_size for n in names)
        c.all_reduce(x)
        return total


def test_shm_needs_are_what_a_real_host_group_creates(group_name):
    needs = qr.config()["shm_bytes"]["2"]["host"]
    assert run_processes(2, _shm_census, group_name)[0] == needs


def test_small_shm_is_a_problem_with_a_remedy():
    config = qr.config()
    need = config["shm_bytes"]["8"]["host"]
    small_mib = need // (1 << 20) // 2
    found = doctor_checks.check_shm(config, False, "/dev/shm", _statvfs(small_mib, small_mib))
    assert [f["status"] for f in found] == ["problem"]
    assert "world size" in found[0]["summary"] and "8" in found[0]["summary"]
    assert "--shm-size" in found[0]["remedy"]
    # The same through main: exit 1, the remedy printed.
    code = doctor.main(["--skip-allreduce"], statvfs=_statvfs(small_mib, small_mib))
    assert code == 1


def test_full_shm_is_a_problem_and_gpu_groups_need_little():
    config = qr.config()
    found = doctor_checks.check_shm(config, False, "/dev/shm", _statvfs(1 << 14, 1))
    assert [f["status"] for f in found] == ["problem"]
    assert "free" in found[0]["summary"] and "qrctl gc" in found[0]["remedy"]
    assert doctor_checks.check_shm(config, True, "/dev/shm",
                                   _statvfs(1 << 14, 1))[0]["status"] == "ok"
    missing = doctor_checks.check_shm(config, False, "/no/such/dir")
    assert missing[0]["status"] == "problem"


def test_shm_on_this_machine_passes(capsys):
    assert doctor_checks.check_shm(qr.config(), False)[0]["status"] == "ok"


# --- the broker socket directory ---

def _socket_env(tmp_path):
    return {"XDG_RUNTIME_DIR": str(tmp_path)}


def test_default_socket_dir_private_or_missing_is_ok(tmp_path):
    env = _socket_env(tmp_path)
    assert doctor_checks.check_socket_dir(env, os.geteuid())[0]["status"] == "ok"  # missing
    d = tmp_path / "quickreduce"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    assert doctor_checks.check_socket_dir(env, os.geteuid())[0]["status"] == "ok"


def test_default_socket_dir_with_loose_mode_is_a_problem(tmp_path):
    d = tmp_path / "quickreduce"
    d.mkdir()
    os.chmod(d, 0o775)
    found = doctor_checks.check_socket_dir(_socket_env(tmp_path), os.geteuid())
    assert found[0]["status"] == "problem"
    assert "0775" in found[0]["summary"]
    assert found[0]["remedy"] == "chmod 700 %s" % d


def test_default_socket_dir_owned_by_another_uid_is_a_problem(tmp_path):
    d = tmp_path / "quickreduce"
    d.mkdir(mode=0o700)
    env = _socket_env(tmp_path)
    # Through the lstat seam everywhere; for real where we may chown.
    real = os.lstat(d)
    fake = lambda p: os.stat_result((real.st_mode, 0, 0, 0, os.geteuid() + 1, 0, 0, 0, 0, 0))
    found = doctor_checks.check_socket_dir(env, os.geteuid(), lstat=fake)
    assert found[0]["status"] == "problem"
    assert "belongs to uid %d" % (os.geteuid() + 1) in found[0]["summary"]
    assert "XDG_RUNTIME_DIR" in found[0]["remedy"]
    if os.geteuid() == 0:
        try:  # a sandbox's user namespace may map no other uid
            os.chown(d, 4242, 4242)
        except OSError:
            return
        found = doctor_checks.check_socket_dir(env, 0)
        assert found[0]["status"] == "problem" and "uid 4242" in found[0]["summary"]
        os.chown(d, 0, 0)


def test_default_socket_dir_as_symlink_is_a_problem(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    os.symlink(target, tmp_path / "quickreduce")
    found = doctor_checks.check_socket_dir(_socket_env(tmp_path), os.geteuid())
    assert found[0]["status"] == "problem" and "symbolic link" in found[0]["summary"]


def test_explicit_socket_dir_writable_by_others_is_a_problem_unless_sticky(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    env = {"QR_BROKER_SOCKET": str(d / "broker.sock"), "XDG_RUNTIME_DIR": str(tmp_path)}
    found = doctor_checks.check_socket_dir(env, os.geteuid())
    assert found[0]["status"] == "problem" and "go-w" in found[0]["remedy"]
    os.chmod(d, 0o1777)  # like /tmp
    assert doctor_checks.check_socket_dir(env, os.geteuid())[0]["status"] == "ok"


def test_foreign_socket_dir_fails_the_whole_command(tmp_path):
    d = tmp_path / "quickreduce"
    d.mkdir()
    os.chmod(d, 0o770)
    env = {"XDG_RUNTIME_DIR": str(tmp_path), "QR_BROKER_SOCKET": ""}
    r = _doctor(["--skip-allreduce"], env=env)
    assert r.returncode == 1, r.stdout.decode()
    assert ("remedy (socket-dir): chmod 700 %s" % d).encode() in r.stdout


# --- GPUs and versions (the library's JSON, faked) ---

def test_gpu_pair_without_peer_access_is_a_problem_naming_it():
    devices = {"platform": "nvidia", "devices": [{"pci_bus_id": "0000:19:00.0"},
                                                 {"pci_bus_id": "0000:3b:00.0"}],
               "peer_access": [[None, True], [False, None]],
               "peer_access_source": [["", "nvml"], ["nvml", ""]]}
    found = doctor_checks.check_gpus(devices)
    problem = [f for f in found if f["status"] == "problem"]
    assert len(problem) == 1
    assert "0000:3b:00.0 -> 0000:19:00.0" in problem[0]["summary"]
    devices["peer_access"][1][0] = True
    assert all(f["status"] == "ok" for f in doctor_checks.check_gpus(devices))


def test_this_machines_gpu_view_is_consistent():
    devices = json.loads(_lib.lib().qr_devices_json().decode())
    n = len(devices["devices"])
    assert len(devices["peer_access"]) == n
    found = doctor_checks.check_gpus(devices)
    assert found[0]["status"] == ("info" if n == 0 else "ok")


def test_driver_older_than_the_library_is_a_problem():
    old = {"platform": "NVIDIA", "runtime_version": 13000, "driver_version": 12080}
    found = doctor_checks.check_versions(old, torch_cuda="12.8")
    assert found[0]["status"] == "problem"
    assert "12.8" in found[0]["summary"] and "13.0" in found[0]["summary"]
    assert "upgrade the GPU driver" in found[0]["remedy"]
    ok = dict(old, driver_version=13010)
    assert doctor_checks.check_versions(ok)[0]["status"] == "ok"
    assert doctor_checks.check_versions(dict(old, driver_version=0))[0]["status"] == "info"


# --- vLLM and SGLang ---

@pytest.mark.parametrize("stack, env, allowed", [
    ("vllm", {}, True),
    ("vllm", {"VLLM_PLUGINS": ""}, False),  # vLLM: set but empty loads none
    ("vllm", {"VLLM_PLUGINS": "other,quickreduce"}, True),
    ("vllm", {"VLLM_PLUGINS": "other"}, False),
    ("sglang", {}, True),
    ("sglang", {"SGLANG_PLUGINS": ""}, True),  # SGLang: empty is no allowlist
    ("sglang", {"SGLANG_PLUGINS": " quickreduce , x"}, True),
    ("sglang", {"SGLANG_PLUGINS": "x"}, False),
])
def test_plugin_allowlists_follow_each_stacks_rules(stack, env, allowed):
    assert stack_info.plugin_allowed(stack, env)[0] is allowed


def test_bypassing_settings_are_named():
    vllm = stack_info.bypasses("vllm", {"pass_config": {"fuse_allreduce_rms": True,
                                                       "enable_sp": False}})
    assert [name for name, _ in vllm] == ["fuse_allreduce_rms"]
    assert [n for n, _ in stack_info.bypasses("vllm", {"fuse_gemm_comms": True})] == \
        ["fuse_gemm_comms"]
    assert stack_info.undecided("vllm", {"pass_config": {"enable_sp": False}}) == \
        ["fuse_allreduce_rms", "fuse_gemm_comms"]
    sgl = {"enable_flashinfer_allreduce_fusion": True, "enable_symm_mem": True}
    assert [n for n, _ in stack_info.bypasses("sglang", sgl)] == \
        ["enable_flashinfer_allreduce_fusion"]
    assert [n for n, _ in stack_info.bypasses("sglang", sgl, {"QR_SGLANG_FIRST": "1"})] == \
        ["enable_flashinfer_allreduce_fusion", "enable_symm_mem"]


def _fake_distribution(root, name, version):
    d = root / ("%s-%s.dist-info" % (name, version))
    d.mkdir()
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" %
                                (name, version))


def test_installed_vllm_without_the_plugin_and_with_fusion_fails(tmp_path):
    _fake_distribution(tmp_path, "vllm", "0.33.0")
    cc = json.dumps({"pass_config": {"fuse_allreduce_rms": True}})
    r = _doctor(["--skip-allreduce", "--json", "--vllm-config", cc],
                env={"VLLM_PLUGINS": "other"}, extra_path=str(tmp_path))
    assert r.returncode == 1
    report = json.loads(r.stdout.decode())
    vllm = _by_check(report["findings"], "vllm")[0]
    assert vllm["status"] == "problem" and vllm["data"]["version"] == "0.33.0"
    assert "add quickreduce to VLLM_PLUGINS" == vllm["remedy"]
    bypass = [f for f in _by_check(report["findings"], "vllm-bypass") if f["status"] == "problem"]
    assert "-cc.pass_config.fuse_allreduce_rms=False" in bypass[0]["remedy"]
    ok = _doctor(["--skip-allreduce", "--vllm-config", json.dumps(
        {"pass_config": {"fuse_allreduce_rms": False, "enable_sp": False,
                         "fuse_gemm_comms": False}})], extra_path=str(tmp_path))
    assert ok.returncode == 0, ok.stdout.decode()
    assert b"vllm 0.33.0" in ok.stdout


# --- the real all-reduce, failing ---

def test_failed_all_reduce_is_a_problem():
    failing = lambda ws, devices: [{"ok": False, "error": "Unavailable: no broker"}, {"ok": True}]
    found = doctor.check_all_reduce(0, run_ranks=failing)
    assert found[0]["status"] == "problem"
    assert "rank 0: Unavailable: no broker" in found[0]["summary"]
    assert "QR_BROKER_SOCKET" in found[0]["remedy"]
    assert doctor.main([], run_ranks=failing) == 1


def test_gpu_all_reduce_is_tried_on_two_gpus_only():
    asked = []

    def record(ws, devices):
        asked.append(tuple(devices))
        return [{"ok": True}] * ws

    found = doctor.check_all_reduce(2, run_ranks=record)
    torch_there = doctor.importlib.util.find_spec("torch") is not None
    assert asked == ([("host", "host"), ("0", "1")] if torch_there else [("host", "host")])
    assert all(f["status"] in ("ok", "info") for f in found)
    asked.clear()
    found = doctor.check_all_reduce(1, run_ranks=record)
    assert asked == [("host", "host")]
    assert _by_check(found, "allreduce-gpu")[0]["status"] == "info"


def test_sglang_fusion_fails_the_command_with_sglangs_own_flag_in_the_remedy():
    cfg = json.dumps({"enable_flashinfer_allreduce_fusion": True})
    r = _doctor(["--skip-allreduce", "--sglang-config", cfg])
    assert r.returncode == 1, r.stdout.decode()
    assert b"remedy (sglang-bypass): to route those all-reduces to quickreduce: drop " \
        b"--enable-flashinfer-allreduce-fusion" in r.stdout


def test_paths_the_opted_in_adapter_serves_are_information_not_problems(tmp_path):
    """fuse_allreduce_rms and enable_sp run through quickreduce once the
    adapter is on (test_integrations_fused.py; sequence parallelism's
    reduce-scatter / all-gather on host and GPU communicators alike); async
    TP still bypasses it."""
    _fake_distribution(tmp_path, "vllm", "0.33.0")
    served = json.dumps({"pass_config": {"fuse_allreduce_rms": True, "enable_sp": False,
                                         "fuse_gemm_comms": False}})
    r = _doctor(["--skip-allreduce", "--json", "--vllm-config", served],
                env={"QR_VLLM": "1"}, extra_path=str(tmp_path))
    assert r.returncode == 0, r.stdout.decode()
    found = _by_check(json.loads(r.stdout.decode())["findings"], "vllm-bypass")
    info = [f for f in found if f["status"] == "info"]
    assert [f["data"]["setting"] for f in info] == ["fuse_allreduce_rms"]
    assert "quickreduce is opted in" in info[0]["summary"]
    sp = json.dumps({"pass_config": {"enable_sp": True, "fuse_allreduce_rms": False,
                                     "fuse_gemm_comms": False}})
    r = _doctor(["--skip-allreduce", "--json", "--vllm-config", sp], env={"QR_VLLM": "1"},
                extra_path=str(tmp_path))
    assert r.returncode == 0, r.stdout.decode()
    found = _by_check(json.loads(r.stdout.decode())["findings"], "vllm-bypass")
    assert [(f["status"], f["data"]["setting"]) for f in found] == [("info", "enable_sp")]
    assert "quickreduce is opted in" in found[0]["summary"]
    r = _doctor(["--skip-allreduce", "--vllm-config", sp], env={"QR_VLLM": "0"},
                extra_path=str(tmp_path))
    assert r.returncode == 1 and b"enable_sp" in r.stdout  # not opted in: still a problem
    # Not opted in (the wheel alone changes nothing): still problems.
    off = _doctor(["--skip-allreduce", "--vllm-config", served], env={"QR_VLLM": "0"},
                  extra_path=str(tmp_path))
    assert off.returncode == 1
    gemm = json.dumps({"pass_config": {"fuse_gemm_comms": True}})
    r = _doctor(["--skip-allreduce", "--vllm-config", gemm], env={"QR_VLLM": "1"},
                extra_path=str(tmp_path))
    assert r.returncode == 1 and b"fuse_gemm_comms" in r.stdout
