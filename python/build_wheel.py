#!/usr/bin/env python3
"""Writes the quickreduce wheel (a zip laid out per PEP 427) from the package
sources and the built native files, without setuptools or a network:

  build_wheel.py --out W.whl --name quickreduce --platform-tag manylinux_2_34_x86_64 \
      --version-header common/version.h --package-root python \
      --lib libquickreduce.so --bin qr-broker --bin qrctl -- <package .py files>

The platform tag is the oldest manylinux tag whose policy the native files
fit (manylinux.py: their GLIBC_/GLIBCXX_/CXXABI_/GCC_ symbol versions and
NEEDED entries): the build fails when they exceed the tag given, and
//python:wheel_tag_test when the tag is not the oldest that fits. The
distribution name tells the flavours apart (quickreduce: CUDA;
quickreduce-host: host-only); both install the `quickreduce` package.
"""

import argparse
import base64
import hashlib
import os
import re
import stat
import zipfile

import manylinux

ENTRY_POINTS = """[vllm.general_plugins]
quickreduce = quickreduce.integrations.vllm:register

[sglang.srt.plugins]
quickreduce = quickreduce.integrations.sglang:register
"""

# For SGLang older than its plugin system: every interpreter of the
# environment runs this line at start-up; it imports nothing unless
# QR_SGLANG=1, and stands down where the plugin system will install
# (quickreduce/integrations/sglang.py).
PTH = ('import os; os.environ.get("QR_SGLANG") == "1" and '
       '__import__("quickreduce.integrations.sglang", fromlist=["arm"]).arm()\n')


def metadata(name, version):
    return """Metadata-Version: 2.1
Name: {name}
Version: {v}
Summary: Fast, optionally quantized all-reduce between independent processes on one node
Requires-Python: >=3.8
Provides-Extra: numpy
Requires-Dist: numpy; extra == "numpy"
Provides-Extra: torch
Requires-Dist: torch; extra == "torch"

quickreduce: a ctypes package over libquickreduce.so (host backend over POSIX
shared memory, GPU backend over IPC with CUDA/HIP kernels), with the broker
(qr-broker) and qrctl inside. See docs/python.md in the source tree.
""".format(name=name, v=version)


WHEEL = """Wheel-Version: 1.0
Generator: quickreduce build_wheel.py
Root-Is-Purelib: false
Tag: py3-none-{tag}
"""


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True, choices=["quickreduce", "quickreduce-host"])
    ap.add_argument("--platform-tag", required=True)
    ap.add_argument("--version-header", required=True)
    ap.add_argument("--package-root", required=True, help="directory holding quickreduce/")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--bin", action="append", default=[])
    ap.add_argument("sources", nargs="+")
    args = ap.parse_args()

    with open(args.version_header) as f:
        m = re.search(r'kVersion = "([^"]+)"', f.read())
    if not m:
        raise SystemExit("no kVersion in " + args.version_header)
    version = m.group(1)
    dist = args.name.replace("-", "_")  # PEP 427's escaping of the name
    dist_info = "%s-%s.dist-info" % (dist, version)
    want = "%s-%s-py3-none-%s.whl" % (dist, version, args.platform_tag)
    if os.path.basename(args.out) != want:
        raise SystemExit("--out must be named %s" % want)
    failures, _, _ = manylinux.check_files(args.platform_tag, [args.lib] + args.bin)
    if failures:
        raise SystemExit("the native files exceed %s:\n%s" % (args.platform_tag, "\n".join(
            "  %s: %s" % (p, "; ".join(bad)) for p, bad in sorted(failures.items()))))

    entries = []  # (name in wheel, bytes, executable)
    root = os.path.normpath(args.package_root)
    for src in sorted(args.sources):
        rel = os.path.relpath(os.path.normpath(src), root)
        if not rel.startswith("quickreduce" + os.sep):
            raise SystemExit("%s is not under %s/quickreduce" % (src, root))
        with open(src, "rb") as f:
            entries.append((rel.replace(os.sep, "/"), f.read(), False))
    with open(args.lib, "rb") as f:
        entries.append(("quickreduce/libquickreduce.so", f.read(), True))
    for b in args.bin:
        with open(b, "rb") as f:
            entries.append(("quickreduce/bin/" + os.path.basename(b), f.read(), True))
    entries.append(("quickreduce_sglang.pth", PTH.encode(), False))
    entries.append((dist_info + "/METADATA", metadata(args.name, version).encode(), False))
    entries.append((dist_info + "/WHEEL", WHEEL.format(tag=args.platform_tag).encode(), False))
    entries.append((dist_info + "/entry_points.txt", ENTRY_POINTS.encode(), False))
    entries.append((dist_info + "/top_level.txt", b"quickreduce\n", False))
    record = [record_line(n, d) for n, d, _ in entries] + [dist_info + "/RECORD,,"]
    entries.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode(), False))

    with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, executable in entries:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))  # reproducible
            mode = 0o755 if executable else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)


if __name__ == "__main__":
    main()
