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
grep -qE '^INT8|^INT6|^INT3|^[A-Z0-9]+ +fp16 ' <<<"$out" && fail "rows outside the filters"

# The policy block: with nothing set, the default regime (FP) takes every
# size on the host backend (no floor); an explicit floor or NONE shows up.
policy_row() { grep -A4 '^policy: ' <<<"$1" | grep -E "^  $2 "; }
grep -q "^policy: qr_all_reduce runs FP (QR_QUANTIZATION unset: the default), bf16 natively;" \
  <<<"$out" || fail "no default policy line"
[[ $(policy_row "$out" fp16 | wc -w) -eq 6 && $(policy_row "$out" fp16 | grep -o yes | wc -l) -eq 5 ]] ||
  fail "the default policy does not take every size: $(policy_row "$out" fp16)"
small=(--device host --regimes FP --dtypes fp16 --sizes 4096)
out=$(QR_MIN_SIZE_BYTES_MB=1 "$demo" "${small[@]}" 2>>"$tmp/err.txt") || fail "demo with a floor failed"
grep -q "floors from QR_MIN_SIZE_BYTES_MB" <<<"$out" || fail "floor source not shown"
[[ "$(policy_row "$out" fp16 | tr -s ' ')" == " fp16 no no yes yes yes" ]] ||
  fail "1 MiB floor: $(policy_row "$out" fp16)"
out=$(QR_QUANTIZATION=NONE "$demo" "${small[@]}" 2>>"$tmp/err.txt") || fail "demo with NONE failed"
grep -q "runs NONE (QR_QUANTIZATION=NONE)" <<<"$out" || fail "NONE not shown"
[[ "$(policy_row "$out" bf16 | tr -s ' ')" == " bf16 no no no no no" ]] ||
  fail "NONE: $(policy_row "$out" bf16)"

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
