#!/usr/bin/env bash
# libquickreduce.so must export the C ABI and nothing else: every defined
# dynamic symbol is qr_*, and the contract's functions are all there.
set -euo pipefail
lib="$1"
defined=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
others=$(echo "$defined" | grep -v '^qr_' || true)
if [[ -n "$others" ]]; then
  echo "exported symbols outside the C ABI:" >&2
  echo "$others" | head -20 >&2
  exit 1
fi
for sym in qr_join qr_should_all_reduce qr_all_reduce qr_all_reduce_ex qr_check qr_leave \
           qr_last_error qr_status_name qr_abort; do
  if ! echo "$defined" | grep -qx "$sym"; then
    echo "missing export: $sym" >&2
    exit 1
  fi
done
echo "exported: $(echo "$defined" | tr '\n' ' ')"
