#!/usr/bin/env bash
# ---- broker wire-decoder fuzz smoke (owned by ipc/; see ipc/fuzz/smoke.sh) ----
# About 30 s of libFuzzer on each fuzz target; fails on any crash. Needs
# clang-14 and libclang-rt-14-dev (.ci/run installs them) and asks ./bazelw
# what each target links.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
exec ipc/fuzz/smoke.sh 30
