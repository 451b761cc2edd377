#!/usr/bin/env bash
# Runs pytest files that need nothing built (pure Python: the bench tools'
# joins and plans) under Bazel with Debian's /usr/bin/python3, which has
# python3-pytest (the python3 first on PATH may be an interpreter without it):
#   pytest_host.sh <test file>... [-- pytest args]
# Paths are relative to the workspace root (Bazel runs the test there, in the
# runfiles). JUnit XML goes to $XML_OUTPUT_FILE, so that every case counts in
# CI's closing line; "no tests collected" (exit 5) is a failure.
set -uo pipefail
export PYTHONDONTWRITEBYTECODE=1
args=(-p no:cacheprovider -q -rs)
[[ -n "${XML_OUTPUT_FILE:-}" ]] && args+=("--junitxml=${XML_OUTPUT_FILE}")
/usr/bin/python3 -m pytest "${args[@]}" "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "pytest_host.sh: no tests collected in $*" >&2
  exit 1
fi
exit $rc
