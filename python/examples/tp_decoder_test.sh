#!/usr/bin/env bash
# Runs tp_decoder_test.py through python/run_pytest.sh from its place in the
# runfiles (it finds the package beside itself).
exec "${TEST_SRCDIR}/${TEST_WORKSPACE}/python/run_pytest.sh" "$@"
