#!/usr/bin/env bash
# Builds the fuzzers with clang-14 (libFuzzer + ASan + UBSan), outside Bazel,
# and runs each for a while (default 30 s; $1 overrides): wire_fuzz (the
# wire decoder, any bytes in text fields) and status_fuzz (the UTF-8 helpers,
# the broker's JSON and qrctl's rendering of any document).
# Exits non-zero if a build fails or a fuzzer finds a crash.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seconds="${1:-30}"
out="${QR_FUZZ_OUT:-/tmp/qr-wire-fuzz}"
mkdir -p "$out"
clang="${CLANGXX:-clang++-14}"
if ! command -v "$clang" >/dev/null; then
  echo "fuzz smoke: $clang not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.
  -DFMT_HEADER_ONLY)  # as //bazel/third_party:fmt builds it
common=(ipc/wire.cc ipc/names.cc common/utf8.cc common/status.cc common/status_macros.cc
  common/env.cc common/limits.cc common/syscall.cc common/unique_fd.cc)
"$clang" "${flags[@]}" ipc/fuzz/wire_fuzz.cc "${common[@]}" -o "$out/wire_fuzz"
"$clang" "${flags[@]}" ipc/fuzz/status_fuzz.cc tools/qrctl_render.cc common/bytes.cc "${common[@]}" \
  -o "$out/status_fuzz"
for target in wire_fuzz status_fuzz; do
  mkdir -p "$out/corpus-$target"
  "$out/$target" -max_total_time="$seconds" -dict=ipc/fuzz/wire.dict \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$out/$target-" \
    "$out/corpus-$target" 2>&1 | tail -n 12
  echo "fuzz smoke: $target ran ${seconds} s without a crash"
done
