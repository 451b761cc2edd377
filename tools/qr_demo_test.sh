#!/usr/bin/env bash
# qr-demo as a user runs it, on the host backend: a private broker socket
# (autostarted), a subset of regimes and dtypes, every check passing, and
# clear errors for bad flags.
set -uo pipefail
demo="tools/qr-demo"
broker="$PWD/ipc/broker/qr-broker"
tmp=$(mktemp -d /tmp/qr-demo-test.XXXXXX)  # socket paths are limited to 107 bytes
trap 'rm -rf "$tmp"' EXIT
export QR_BROKER_SOCKET="$tmp/broker.sock" QR_BROKER_BIN="$broker" QR_LOG_LEVEL=warn
fail() { echo "FAIL: $*"; exit 1; }

out=$("$demo" --device host --regimes INT4,FP --dtypes bf16 --sizes 4096,8388608 2>"$tmp/err.txt")
rc=$?
echo "$out"
[[ $rc -eq 0 ]] || { cat "$tmp/err.txt"; fail "demo exited $rc"; }
grep -q "all checks passed" <<<"$out" || fail "no 'all checks passed'"
# Exactly the 2 regimes x 1 dtype x 2 sizes asked for, every row bit-exact.
rows=$(grep -cE '^(FP|INT8|INT6|INT4|INT3) ' <<<"$out")
[[ $rows -eq 4 ]] || fail "expected 4 rows, got $rows"
grep -E '^(FP|INT4) +bf16 ' <<<"$out" | grep -vq bit-exact && fail "a row is not bit-exact"
grep -qE '^INT8|^INT6|^INT3| fp16 ' <<<"$out" && fail "rows outside the filters"

check_error() {  # check_error <expected message> <flags...>
  local want="$1"; shift
  if "$demo" "$@" >"$tmp/out.txt" 2>&1; then fail "'$*' succeeded"; fi
  grep -q "$want" "$tmp/out.txt" || { cat "$tmp/out.txt"; fail "'$*' did not say '$want'"; }
}
check_error "regime 'INT5' is not one of" --device host --regimes INT5
check_error "dtype 'fp32' is not fp16 or bf16" --device host --dtypes fp16,fp32
check_error "regime '' is not one of" --device host --regimes FP,
check_error "is not a positive multiple of 16" --device host --sizes 100
echo "PASS"
