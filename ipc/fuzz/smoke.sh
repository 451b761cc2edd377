#!/usr/bin/env bash
# Builds the wire-decoder fuzzer with clang-14 (libFuzzer + ASan + UBSan),
# outside Bazel, and runs it for a while (default 30 s; $1 overrides).
# Exits non-zero if the build fails or the fuzzer finds a crash.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seconds="${1:-30}"
out="${QR_FUZZ_OUT:-/tmp/qr-wire-fuzz}"
mkdir -p "$out/corpus"
clang="${CLANGXX:-clang++-14}"
if ! command -v "$clang" >/dev/null; then
  echo "fuzz smoke: $clang not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi
"$clang" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I. \
  ipc/fuzz/wire_fuzz.cc ipc/wire.cc ipc/names.cc \
  common/status.cc common/status_macros.cc common/env.cc \
  -o "$out/wire_fuzz"
"$out/wire_fuzz" -max_total_time="$seconds" -dict=ipc/fuzz/wire.dict \
  -max_len=4096 -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" 2>&1 |
  tail -n 25
echo "fuzz smoke: ${seconds} s without a crash"
