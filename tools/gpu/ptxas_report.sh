#!/usr/bin/env bash
# Registers and spills of every kernel in the given .cu files, as ptxas
# reports them for the CUDA build: Bazel's own compile command for each
# file (bazel aquery, so the flags stay bazel/gpu.bzl's) with -Xptxas -v
# added and the object written aside. Runs HERE, where nvcc and Bazel are;
# no GPU needed.
#   tools/gpu/ptxas_report.sh kernels/gpu/one_shot_fused.cu kernels/gpu/one_shot.cu
# Prints "<registers> regs <bytes> spill stores  <kernel>" a line. The fused
# kernel is bounded to 64 registers a thread (its __launch_bounds__); a
# change that makes it spill shows here before it shows on a GPU
# (docs/performance.md "Peers' loads together, the tree on every warp").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
(($# > 0)) || { echo "usage: $0 FILE.cu..." >&2; exit 2; }
# The generated HIP overlay headers the commands include.
./bazelw build -c opt //kernels/gpu:two_shot_device >/dev/null 2>&1
root=$(./bazelw info -c opt execution_root 2>/dev/null)
actions=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$actions"' EXIT
./bazelw aquery -c opt 'mnemonic("NvccCompile", //...)' --output=jsonproto 2>/dev/null >"$actions"
for f in "$@"; do
  echo "== $f"
  # The nvcc argv of the action compiling f, one argument a line.
  python3 - "$actions" "$f" "$tmp/out.o" >"$tmp/argv" <<'PY'
import json, sys
actions, src, out = sys.argv[1:]
for a in json.load(open(actions)).get("actions", []):
    args = a["arguments"]
    if src in args:
        args = args[next(i for i, x in enumerate(args) if x.endswith("nvcc")):]
        args[args.index("-o") + 1] = out
        print("\n".join(args + ["-Xptxas", "-v"]))
        break
else:
    sys.exit("no Bazel compile action for " + src)
PY
  mapfile -t argv <"$tmp/argv"
  (cd "$root" && TMPDIR="$tmp" "${argv[@]}" 2>&1) |
    awk '/Compiling entry function/ { split($0, q, "\047"); name = q[2] }
         /spill stores/ { spill = $5 }
         /Used [0-9]+ registers/ && name != "" {
           for (i = 1; i <= NF; ++i) if ($i == "Used") regs = $(i + 1)
           printf "%4d regs %4d spill stores  %s\n", regs, spill, name; name = "" }' |
    c++filt
done
