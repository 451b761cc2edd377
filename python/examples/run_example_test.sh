#!/usr/bin/env bash
# Runs an example's pytest file (its path under python/ is an argument)
# through python/run_pytest.sh at its place in the runfiles, where that
# script finds the package beside itself.
exec "${TEST_SRCDIR}/${TEST_WORKSPACE}/python/run_pytest.sh" "$@"
