#!/usr/bin/env bash
# ---- broker wire-decoder fuzz smoke (owned by ipc/; see ipc/fuzz/smoke.sh) ----
# About 30 s of libFuzzer on the decoder; fails on any crash.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
exec ipc/fuzz/smoke.sh 30
