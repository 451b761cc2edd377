#!/usr/bin/env bash
# Builds the fuzzers with clang-14 (libFuzzer + ASan + UBSan), outside Bazel,
# and runs each for a while (default 30 s; $1 overrides): wire_fuzz (the
# wire decoder, any bytes in text fields) and status_fuzz (the UTF-8 helpers,
# the broker's JSON and qrctl's rendering of any document).
# What each links is asked of Bazel (the project's .cc files below
# //ipc/fuzz:<target>, and the defines and link flags its libraries carry),
# so moving code between libraries cannot break this build.
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
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.)

# bazel <log> <args...>: Bazel's answer on stdout, its chatter in the log
# (shown when it fails).
bazel() {
  local log="$1"; shift
  ./bazelw "$@" 2>"$log" || { cat "$log" >&2; echo "fuzz smoke: bazel $* failed" >&2; return 1; }
}

# The project's own .cc files in the target's closure, as paths. An external
# source (an @repository) cannot be built here, so it stops the smoke.
sources() {
  local labels
  labels=$(bazel "$out/query.log" query --noimplicit_deps \
    "kind('source file', deps(//ipc/fuzz:$1))")
  if grep -v '^//' <<<"$labels" >&2; then
    echo "fuzz smoke: //ipc/fuzz:$1 has sources outside this repository (above)" >&2
    return 1
  fi
  grep -E '\.cc$' <<<"$labels" | sed -e 's|^//||' -e 's|^:||' -e 's|:|/|'
}

# -D for every define the target's libraries carry (FMT_HEADER_ONLY...), then
# their link flags, one a line.
cc_flags() {
  local cc='providers(target)["CcInfo"]'
  bazel "$out/cquery.log" cquery "//ipc/fuzz:$1" --output=starlark --starlark:expr="'\n'.join(
    ['-D' + d for d in $cc.compilation_context.defines.to_list()] +
    [f for i in $cc.linking_context.linker_inputs.to_list() for f in i.user_link_flags])"
}

# The Bazel questions one after the other (one server), the two compiles and
# then the two fuzz runs side by side: each is one single-threaded process,
# and CI has two cores.
builds=()
for target in wire_fuzz status_fuzz; do
  list=$(sources "$target")  # not mapfile < <(...): a failure must stop the smoke
  mapfile -t srcs <<<"$list"
  list=$(cc_flags "$target")
  mapfile -t extra <<<"$list"
  defines=() links=()
  for f in "${extra[@]}"; do
    [[ -z "$f" ]] && continue
    if [[ "$f" == -D* ]]; then defines+=("$f"); else links+=("$f"); fi
  done
  echo "fuzz smoke: $target from ${#srcs[@]} sources: ${srcs[*]} ${defines[*]} ${links[*]}"
  "$clang" "${flags[@]}" "${defines[@]}" "${srcs[@]}" "${links[@]}" -o "$out/$target" \
    >"$out/$target.build.log" 2>&1 &
  builds+=("$target:$!")
done
built=1
for b in "${builds[@]}"; do
  target="${b%%:*}"
  if wait "${b#*:}"; then
    cat "$out/$target.build.log"
  else
    cat "$out/$target.build.log" >&2
    echo "fuzz smoke: $target did not build" >&2
    built=0
  fi
done
((built)) || exit 1

runs=()
for target in wire_fuzz status_fuzz; do
  mkdir -p "$out/corpus-$target"
  "$out/$target" -max_total_time="$seconds" -dict=ipc/fuzz/wire.dict \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$out/$target-" \
    "$out/corpus-$target" >"$out/$target.run.log" 2>&1 &
  runs+=("$target:$!")
done
failed=0
for r in "${runs[@]}"; do
  target="${r%%:*}"
  if wait "${r#*:}"; then
    tail -n 12 "$out/$target.run.log"
    echo "fuzz smoke: $target ran ${seconds} s without a crash"
  else
    tail -n 60 "$out/$target.run.log" >&2
    echo "fuzz smoke: $target failed (a crash leaves its input as $out/$target-*)" >&2
    failed=1
  fi
done
exit $failed
