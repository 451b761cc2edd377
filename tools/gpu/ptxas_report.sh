#!/usr/bin/env bash
# Registers and spills of every kernel in the given .cu files, as ptxas
# reports them for the CUDA build (the nvcc flags of bazel/gpu.bzl plus
# -Xptxas -v). Runs HERE, where nvcc and Bazel are; no GPU needed.
#   tools/gpu/ptxas_report.sh kernels/gpu/one_shot_fused.cu kernels/gpu/one_shot.cu
# Prints "<registers> regs <bytes> spill stores  <kernel>" a line. The fused
# kernel is bounded to 64 registers a thread (its __launch_bounds__); a
# change that makes it spill shows here before it shows on a GPU
# (docs/performance.md "Peers' loads together, the tree on every warp").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
(($# > 0)) || { echo "usage: $0 FILE.cu..." >&2; exit 2; }
# The HIP overlay headers are generated: build them once.
./bazelw build -c opt //kernels/gpu:two_shot_device >/dev/null 2>&1
root=$(./bazelw info -c opt execution_root 2>/dev/null)
bin=$(./bazelw info -c opt bazel-bin 2>/dev/null)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$@"; do
  echo "== $f"
  TMPDIR="$tmp" /usr/local/cuda/bin/nvcc -x cu -diag-suppress=20012 --expt-relaxed-constexpr \
    -gencode=arch=compute_90,code=sm_90 -std=c++17 -O3 -I . -I "$bin" -I "$root/external/cuda" \
    -isystem bazel/hip/overlay -isystem "$bin/bazel/hip/overlay" -isystem "$root/external/cuda/include" \
    -Xptxas -v -c "$f" -o "$tmp/out.o" 2>&1 |
    awk '/Compiling entry function/ { split($0, q, "\047"); name = q[2] }
         /spill stores/ { spill = $5 }
         /Used [0-9]+ registers/ && name != "" {
           for (i = 1; i <= NF; ++i) if ($i == "Used") regs = $(i + 1)
           printf "%4d regs %4d spill stores  %s\n", regs, spill, name; name = "" }' |
    c++filt
done
