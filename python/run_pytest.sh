#!/usr/bin/env bash
# Runs one pytest file of python/tests under Bazel with Debian's
# /usr/bin/python3 (the python3 first on PATH may be an interpreter that does
# not see Debian's numpy/pytest/torch), against the built library and broker:
#   run_pytest.sh <libquickreduce.so> <qr-broker> <qrctl> <test file> [pytest args]
# <test file> is a name in python/tests, or a path under python/ (examples/x_test.py).
# JUnit XML goes to $XML_OUTPUT_FILE, so every pytest case counts in CI's
# closing line. "No tests collected" (exit 5) is a failure, except for a file
# that needs torch where there is none (one skipped case).
set -euo pipefail
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
export QR_LIBRARY="$(abs "$1")" QR_BROKER_BIN="$(abs "$2")" QR_QRCTL_BIN="$(abs "$3")"
test_file="$4"
shift 4
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONPATH="${here}${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
# torch's CPU kernels must not take more threads than the machine has cores
# to share with the rank processes.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
args=(-p no:cacheprovider -q -rs)
[[ -n "${XML_OUTPUT_FILE:-}" ]] && args+=("--junitxml=${XML_OUTPUT_FILE}")
set +e
case "$test_file" in
  */*) test_path="${here}/${test_file}" ;;
  *) test_path="${here}/tests/${test_file}" ;;
esac
# A file that needs torch (module-level importorskip) on a machine without
# it, such as the fresh-Debian CI chroot: one skipped case, not a failure.
if grep -q 'pytest.importorskip("torch")' "${test_path}" &&
   ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "run_pytest.sh: ${test_file} skipped: torch is not installed"
  if [[ -n "${XML_OUTPUT_FILE:-}" ]]; then
    printf '<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="%s" tests="1" skipped="1"><testcase name="%s"><skipped message="torch is not installed"/></testcase></testsuite></testsuites>\n' \
      "${test_file}" "${test_file}" >"${XML_OUTPUT_FILE}"
  fi
  exit 0
fi
/usr/bin/python3 -m pytest "${args[@]}" "${test_path}" "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
  echo "run_pytest.sh: no tests collected in ${test_file}" >&2
  exit 1
fi
exit $rc
