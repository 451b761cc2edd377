#!/usr/bin/env bash
# libquickreduce.so must export the C ABI and nothing else: every defined
# global dynamic symbol is qr_*, and the contract's functions are all there.
# (Header-only spdlog leaves LOCAL TLS entries in .dynsym for its own TLS
# relocations; they bind to nothing outside the library.)
set -euo pipefail
lib="$1"
defined=$(readelf --dyn-syms -W "$lib" |
  awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK" || $5 == "UNIQUE") {print $8}' |
  sed 's/@.*//' | sort -u)
# Lookups read here-strings, not `echo | grep -q`: bash writes echo's output a
# line at a time, grep -q exits at its match, and a writer descheduled in
# between (a loaded machine) dies of SIGPIPE, which pipefail turned into a
# "missing export" of a symbol that was there.
others=$(grep -v '^qr_' <<<"$defined" || true)
if [[ -n "$others" ]]; then
  echo "exported symbols outside the C ABI:" >&2
  head -20 <<<"$others" >&2
  exit 1
fi
for sym in qr_join qr_should_all_reduce qr_all_reduce qr_all_reduce_ex qr_check qr_leave \
           qr_last_error qr_status_name qr_abort qr_comm_rank qr_comm_world_size \
           qr_version qr_config_json qr_should_all_reduce_ex qr_reference_all_reduce \
           qr_reference_check_bound qr_reference_error_bounds qr_devices_json qr_reduce_scatter_ex \
           qr_all_reduce_residual_rmsnorm qr_reference_all_reduce_residual_rmsnorm \
           qr_all_reduce_residual_rmsnorm_fp8 qr_reference_all_reduce_residual_rmsnorm_fp8 \
           qr_all_gather_ex; do
  if ! grep -qx "$sym" <<<"$defined"; then
    echo "missing export: $sym" >&2
    exit 1
  fi
done
# The library must load where Debian's spdlog and fmt are not installed.
if readelf -d "$lib" | grep -E 'NEEDED.*(spdlog|fmt)'; then
  echo "libquickreduce.so needs spdlog/fmt shared libraries" >&2
  exit 1
fi
echo "exported: $(echo "$defined" | tr '\n' ' ')"
