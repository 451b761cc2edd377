"""python -m quickreduce doctor [--json] [--vllm-config JSON] [--sglang-config JSON]
[--skip-allreduce]: whether this machine can run quickreduce and what vLLM or
SGLang will get from it. Checks (quickreduce/doctor_checks.py and
quickreduce/stack_info.py): the library; visible GPUs and their peer-access
matrix by PCI bus id; the driver's CUDA/HIP version against the library's;
/dev/shm size and free space against what a group of each world size needs;
the broker socket directory; installed vLLM/SGLang, their plugin allowlists
and the settings that route all-reduces around quickreduce; one real
two-rank all-reduce on the host backend, and on GPUs 0 and 1 where there are
two. Exit 0 when all is well, 1 with a remedy line per problem, 2 on bad
usage."""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import uuid

from . import doctor_checks as checks
from . import stack_info
from .integrations import _policy
from .doctor_checks import finding

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def check_library():
    """The library loads; its version, configuration and device view."""
    from . import _lib
    try:
        lib = _lib.lib()
        config = json.loads(lib.qr_config_json(None).decode())
        text = lib.qr_devices_json()
        devices = json.loads(text.decode()) if text else {}
    except Exception as e:  # any failure here is the finding
        return [finding("library", "problem", "%s: %s" % (type(e).__name__, e),
                        remedy="reinstall the quickreduce wheel, or set QR_LIBRARY to a "
                        "libquickreduce.so; an invalid QR_* variable is named above")], None, None
    return [finding("library", "ok", "%s %s (built for %s)" % (_lib.path(), config.get("version"),
                                                              devices.get("platform")),
                    data={"path": _lib.path(), "config": config})], config, devices


def torch_cuda_version():
    try:
        import torch
    except Exception:
        return None
    return getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None)


def check_stacks(environ, vllm_config=None, sglang_config=None):
    out = []
    for stack, settings in (("vllm", vllm_config), ("sglang", sglang_config)):
        version = stack_info.installed_version(stack)
        if version is None and settings is None:
            out.append(finding(stack, "info", "%s is not installed" % stack))
            continue
        data = {"version": version}
        allowed, why = stack_info.plugin_allowed(stack, environ)
        data["plugin_allowed"] = allowed
        if not allowed:
            out.append(finding(stack, "problem", "%s %s will not load quickreduce's plugin: %s" %
                               (stack, version or "(not installed)", why),
                               remedy="add %s to %s" % (stack_info.PLUGIN_NAME,
                                                        stack_info.STACKS[stack][1]),
                               data=data))
        else:
            out.append(finding(stack, "ok", "%s %s; %s" % (stack, version or "(not installed)",
                                                            why), data=data))
        found = stack_info.bypasses(stack, settings, environ)
        for name, why_bypass in found:
            served = stack_info.served_by_adapter(stack, name)
            if served and _policy.enabled(stack, environ):
                out.append(finding(stack + "-bypass", "info", "%s: %s; quickreduce is opted in: %s"
                                   % (name, why_bypass, served), data={"setting": name}))
                continue
            out.append(finding(
                stack + "-bypass", "problem",
                "%s: %s, so quickreduce never sees those all-reduces" % (name, why_bypass),
                remedy="to route those all-reduces to quickreduce: " +
                stack_info.remedy(stack, name),
                data={"setting": name}))
        if settings is None:
            hint = ("vLLM's optimization level decides fuse_allreduce_rms, enable_sp and "
                    "fuse_gemm_comms (-O2 and up enable fuse_allreduce_rms on Hopper/Blackwell "
                    "with FlashInfer): pass --vllm-config '<your --compilation-config JSON>' "
                    "to check them" if stack == "vllm" else
                    "SGLang enables FlashInfer all-reduce fusion by itself for some models on "
                    "SM90/SM100: pass --sglang-config '<server args as JSON>' to check yours")
            out.append(finding(stack + "-bypass", "info", hint))
        elif not found:
            left = stack_info.undecided(stack, settings)
            out.append(finding(stack + "-bypass", "ok" if not left else "info",
                               "no setting routes all-reduces around quickreduce" +
                               ("; left to the optimization level: " + ", ".join(left)
                                if left else "")))
    return out


def _run_ranks(world_size, devices, timeout_s=60):
    """Starts one probe process per rank; returns a list of result dicts."""
    group = "doctor-" + uuid.uuid4().hex[:12]
    env = dict(os.environ)
    env["PYTHONPATH"] = _PACKAGE_PARENT + (os.pathsep + env["PYTHONPATH"]
                                           if env.get("PYTHONPATH") else "")
    procs = [subprocess.Popen([sys.executable, "-m", "quickreduce.doctor_probe", group, str(r),
                               str(world_size), devices[r]], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for r in range(world_size)]
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            results.append({"ok": False, "error": "no answer within %d s" % timeout_s})
            continue
        lines = out.decode(errors="replace").strip().splitlines()
        try:
            results.append(json.loads(lines[-1]))
        except (IndexError, ValueError):
            results.append({"ok": False, "error": "exit %d: %s" %
                            (p.returncode, err.decode(errors="replace").strip()[-400:])})
    return results


def check_all_reduce(gpu_count, run_ranks=_run_ranks):
    """Two ranks through the broker the library would use (autostarting one
    as any client does, unless QR_BROKER_AUTOSTART=0)."""
    out = []
    targets = [("host", ["host", "host"])]
    has_torch = importlib.util.find_spec("torch") is not None
    if gpu_count >= 2 and has_torch:
        targets.append(("gpu", ["0", "1"]))
    for name, devices in targets:
        results = run_ranks(2, devices)
        bad = [(r, x.get("error")) for r, x in enumerate(results) if not x.get("ok")]
        if bad:
            out.append(finding(
                "allreduce-" + name, "problem",
                "a two-rank %s all-reduce failed: %s" %
                (name, "; ".join("rank %d: %s" % b for b in bad)),
                remedy="run `python -m quickreduce status` (is a broker reachable? "
                       "QR_BROKER_SOCKET, QR_BROKER_AUTOSTART) and fix the problems above; "
                       "QR_LOG_LEVEL=debug shows the library's reasons"))
        else:
            out.append(finding("allreduce-" + name, "ok",
                               "a two-rank %s all-reduce (one-shot and two-shot sizes) gave "
                               "the right sums" % name))
    if gpu_count >= 2 and not has_torch:
        out.append(finding("allreduce-gpu", "info", "torch is not installed: no GPU all-reduce "
                           "tried (the probe uses CUDA tensors)"))
    if gpu_count == 1:
        out.append(finding("allreduce-gpu", "info", "one GPU: no GPU all-reduce tried (ranks "
                           "sharing a GPU need NVIDIA MPS and QR_ALLOW_SHARED_DEVICE=1)"))
    return out


def diagnose(environ=None, vllm_config=None, sglang_config=None, skip_all_reduce=False,
             shm_dir="/dev/shm", statvfs=os.statvfs, run_ranks=_run_ranks):
    """Every finding, in report order."""
    environ = os.environ if environ is None else environ
    found, config, devices = check_library()
    if config is not None:
        found += checks.check_gpus(devices)
        # torch's CUDA only matters beside a GPU (and importing it takes seconds).
        has_gpu = bool(devices.get("devices"))
        found += checks.check_versions(devices, torch_cuda_version() if has_gpu else None)
        found += checks.check_shm(config, bool(devices.get("devices")), shm_dir, statvfs)
    found += checks.check_socket_dir(environ, os.geteuid(), os.getuid())
    found += check_stacks(environ, vllm_config, sglang_config)
    if config is not None and not skip_all_reduce:
        found += check_all_reduce(len(devices.get("devices", [])), run_ranks)
    return found


def render(findings):
    mark = {"ok": "ok     ", "info": "info   ", "problem": "PROBLEM"}
    lines = ["%s %-16s %s" % (mark[f["status"]], f["check"], f["summary"]) for f in findings]
    problems = [f for f in findings if f["status"] == "problem"]
    if problems:
        lines.append("")
        lines.append("%d problem(s):" % len(problems))
        lines += ["  remedy (%s): %s" % (f["check"], f["remedy"]) for f in problems]
    else:
        lines.append("")
        lines.append("all is well")
    return "\n".join(lines)


def _json_arg(text, flag):
    """The JSON object of a --*-config flag; ValueError naming the flag."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError("%s is not JSON: %s" % (flag, e))
    if not isinstance(value, dict):
        raise ValueError("%s must be a JSON object" % flag)
    return value


def main(argv, **seams):
    p = argparse.ArgumentParser(prog="python -m quickreduce doctor",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--vllm-config", help="vLLM's --compilation-config JSON to check")
    p.add_argument("--sglang-config", help="SGLang server arguments as a JSON object to check")
    p.add_argument("--skip-allreduce", action="store_true", help="do not run the real all-reduce")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        vllm = _json_arg(args.vllm_config, "--vllm-config") if args.vllm_config else None
        sglang = _json_arg(args.sglang_config, "--sglang-config") if args.sglang_config else None
    except ValueError as e:
        print("quickreduce doctor: %s" % e, file=sys.stderr)
        return 2
    findings = diagnose(vllm_config=vllm, sglang_config=sglang,
                        skip_all_reduce=args.skip_allreduce, **seams)
    problems = sum(1 for f in findings if f["status"] == "problem")
    if args.json:
        print(json.dumps({"ok": problems == 0, "findings": findings}, indent=2, sort_keys=True))
    else:
        print(render(findings))
    return 1 if problems else 0
