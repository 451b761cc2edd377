#!/usr/bin/env python3
"""The manylinux platform tag a wheel may carry, from what its ELF files need.

A manylinux_X_Y tag (PEP 600) promises that the wheel runs on any x86_64
distribution with glibc X.Y or newer. What that allows is auditwheel's policy
for the tag: the symbol versions of glibc (GLIBC_), libstdc++ (GLIBCXX_,
CXXABI_) and libgcc_s (GCC_) an ELF file may require, and the libraries it
may list as NEEDED (the dynamic loader, ld-linux*, always allowed). POLICIES
below is the x86_64 part of auditwheel's src/auditwheel/policy/manylinux-policy.json
(pypa/auditwheel, commit 2d1ad6396bff90cfff09321a4a4480b3955fe6a5) for the
tags 2_17 (manylinux2014), 2_24, 2_31, 2_34 and 2_36, written as the highest
version of each prefix plus the non-numeric names each allows. auditwheel's
2_27/2_28 are left out: files that fit them would be given 2_31 here, a tag
later than needed but never one they exceed.

  manylinux.py requirements FILE...      what the ELF files need
  manylinux.py check-wheel WHEEL         fails unless every ELF file in the
                                         wheel fits the tag it carries and that
                                         tag is the oldest that fits
Used by build_wheel.py (the build fails on a tag the files exceed) and by
//python:wheel_tag_test.
"""

import os
import re
import subprocess
import sys
import tempfile
import zipfile

_WHITELIST_2_17 = frozenset([
    "libgcc_s.so.1", "libstdc++.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libc.so.6",
    "libnsl.so.1", "libutil.so.1", "libpthread.so.0", "libresolv.so.2", "libX11.so.6",
    "libXext.so.6", "libXrender.so.1", "libICE.so.6", "libSM.so.6", "libGL.so.1",
    "libgobject-2.0.so.0", "libgthread-2.0.so.0", "libglib-2.0.so.0", "libexpat.so.1",
    "libz.so.1", "libatomic.so.1", "libanl.so.1",
])
_WHITELIST_2_31 = _WHITELIST_2_17 | {"libmvec.so.1"}

# tag -> (highest numeric version per prefix, other allowed names, NEEDED whitelist)
POLICIES = {
    "manylinux_2_17_x86_64": ({"GLIBC": "2.17", "GLIBCXX": "3.4.19", "CXXABI": "1.3.7",
                               "GCC": "4.8.0"}, {"CXXABI_TM_1"}, _WHITELIST_2_17),
    "manylinux_2_24_x86_64": ({"GLIBC": "2.24", "GLIBCXX": "3.4.22", "CXXABI": "1.3.10",
                               "GCC": "4.8.0"}, {"CXXABI_TM_1", "CXXABI_FLOAT128"},
                              _WHITELIST_2_17),
    "manylinux_2_31_x86_64": ({"GLIBC": "2.31", "GLIBCXX": "3.4.28", "CXXABI": "1.3.12",
                               "GCC": "7.0.0"}, {"CXXABI_TM_1", "CXXABI_FLOAT128"},
                              _WHITELIST_2_31),
    "manylinux_2_34_x86_64": ({"GLIBC": "2.34", "GLIBCXX": "3.4.29", "CXXABI": "1.3.13",
                               "GCC": "7.0.0"}, {"CXXABI_TM_1", "CXXABI_FLOAT128"},
                              _WHITELIST_2_31),
    "manylinux_2_36_x86_64": ({"GLIBC": "2.36", "GLIBCXX": "3.4.30", "CXXABI": "1.3.13",
                               "GCC": "12.0.0"},
                              {"CXXABI_TM_1", "CXXABI_FLOAT128", "GLIBC_ABI_DT_RELR"},
                              _WHITELIST_2_31),
}
# Oldest first: the first that fits is the tag to use.
ORDER = sorted(POLICIES, key=lambda t: tuple(int(x) for x in t.split("_")[1:3]))

_PREFIXES = ("GLIBC", "GLIBCXX", "CXXABI", "GCC")
_VERSION_RE = re.compile(r"^(GLIBC|GLIBCXX|CXXABI|GCC)_([0-9][0-9.]*)$")


def _vtuple(v):
    return tuple(int(x) for x in v.split("."))


def requirements(path):
    """(set of required symbol versions of the four prefixes, list of NEEDED) of one ELF file."""
    out = subprocess.run(["readelf", "-d", "-V", "-W", path], check=True, capture_output=True,
                         text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    # The version-needs section only: "Name: GLIBC_2.34  Flags: ..." under .gnu.version_r.
    section = out.split(".gnu.version_r", 1)[1] if ".gnu.version_r" in out else ""
    versions = {m for m in re.findall(r"Name: (\S+)", section)
                if m.split("_", 1)[0] in _PREFIXES}
    return versions, needed


def violations(tag, versions, needed):
    """What of (versions, needed) the tag's policy does not allow; empty when it fits."""
    if tag not in POLICIES:
        return ["no policy for tag %s (known: %s)" % (tag, ", ".join(ORDER))]
    highest, others, whitelist = POLICIES[tag]
    bad = []
    for v in sorted(versions):
        m = _VERSION_RE.match(v)
        if m:
            if _vtuple(m.group(2)) > _vtuple(highest[m.group(1)]):
                bad.append("%s (the tag allows %s_%s at most)" % (v, m.group(1), highest[m.group(1)]))
        elif v not in others:
            bad.append("%s (not allowed by the tag)" % v)
    for n in needed:
        if n.startswith("ld-linux") or n in whitelist:
            continue
        bad.append("NEEDED %s (not a library the tag lets a wheel assume)" % n)
    return bad


def oldest_fitting(versions, needed):
    for tag in ORDER:
        if not violations(tag, versions, needed):
            return tag
    return None


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def check_files(tag, paths):
    """Every ELF file among paths fits tag: {path: [violations]} for those that do not,
    and the union of what they need."""
    failures, all_versions, all_needed = {}, set(), set()
    for p in paths:
        if not is_elf(p):
            continue
        versions, needed = requirements(p)
        all_versions |= versions
        all_needed |= set(needed)
        bad = violations(tag, versions, needed)
        if bad:
            failures[p] = bad
    return failures, all_versions, all_needed


def wheel_tag(names_to_bytes):
    wheel_files = [n for n in names_to_bytes if n.endswith(".dist-info/WHEEL")]
    if len(wheel_files) != 1:
        raise SystemExit("expected one .dist-info/WHEEL, found %s" % wheel_files)
    tags = re.findall(r"^Tag: (\S+)$", names_to_bytes[wheel_files[0]].decode(), re.M)
    if len(tags) != 1:
        raise SystemExit("expected one Tag line, found %s" % tags)
    return tags[0].split("-")[2]


def check_wheel(path):
    """Errors of the wheel at path (empty when it is fine), and a summary line."""
    errors = []
    with zipfile.ZipFile(path) as z, tempfile.TemporaryDirectory() as tmp:
        contents = {n: z.read(n) for n in z.namelist()}
        tag = wheel_tag(contents)
        if not os.path.basename(path).endswith("-%s.whl" % tag):
            errors.append("file name %s does not end in the WHEEL tag %s" % (path, tag))
        files = []
        for n, data in contents.items():
            if data[:4] == b"\x7fELF":
                p = os.path.join(tmp, n.replace("/", "_"))
                with open(p, "wb") as f:
                    f.write(data)
                files.append((n, p))
        if not files:
            errors.append("no ELF file in the wheel: nothing to check the tag against")
        failures, versions, needed = check_files(tag, [p for _, p in files])
        for n, p in files:
            for bad in failures.get(p, []):
                errors.append("%s needs %s" % (n, bad))
        oldest = oldest_fitting(versions, sorted(needed))
        if not failures and oldest != tag:
            errors.append("tag %s is not the oldest that fits: %s does" % (tag, oldest))
    summary = "%s: %d ELF files, tag %s; they need %s; NEEDED %s" % (
        os.path.basename(path), len(files), tag,
        ", ".join(max((v for v in versions if v.startswith(p + "_") and _VERSION_RE.match(v)),
                      key=lambda v: _vtuple(v.split("_", 1)[1]), default=p + " none")
                  for p in _PREFIXES),
        " ".join(sorted(needed)))
    return errors, summary


def main(argv):
    if len(argv) >= 2 and argv[0] == "requirements":
        for p in argv[1:]:
            versions, needed = requirements(p)
            print("%s: oldest tag %s; %s; NEEDED %s" % (p, oldest_fitting(versions, needed),
                                                         " ".join(sorted(versions)),
                                                         " ".join(needed)))
        return 0
    if len(argv) == 2 and argv[0] == "check-wheel":
        errors, summary = check_wheel(argv[1])
        print(summary)
        for e in errors:
            print("FAILED: " + e, file=sys.stderr)
        return 1 if errors else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
