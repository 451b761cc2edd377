#!/usr/bin/env bash
# bazelw's QR_BAZEL_OUTPUT_BASE: a bare name becomes ~/.cache/<name> (inside
# the checkout Bazel would walk into it), a path is taken as given. A fake
# `bazel` on PATH prints the arguments bazelw hands it.
set -euo pipefail
bazelw="$1"
work="$TEST_TMPDIR/bazelw-output-base"
mkdir -p "$work/bin" "$work/home"
cat > "$work/bin/bazel" <<'FAKE'
#!/usr/bin/env bash
printf '%s\n' "$@"
FAKE
chmod +x "$work/bin/bazel"
run() { HOME="$work/home" PATH="$work/bin:$PATH" QR_GPU_PLATFORM=none "$@" info 2>/dev/null; }
got=$(QR_BAZEL_OUTPUT_BASE=qr-test run "$bazelw" | grep -- '--output_base=')
[[ "$got" == "--output_base=$work/home/.cache/qr-test" ]] ||
  { echo "bare name: got '$got'" >&2; exit 1; }
got=$(QR_BAZEL_OUTPUT_BASE=/tmp/qr-test-ob run "$bazelw" | grep -- '--output_base=')
[[ "$got" == "--output_base=/tmp/qr-test-ob" ]] ||
  { echo "absolute path: got '$got'" >&2; exit 1; }
echo "bazelw output base: ok"
