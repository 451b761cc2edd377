#!/usr/bin/env bash
# The version Bazel rules put in file names (bazel/version.bzl) is the one the
# code reports (common/version.h).
set -euo pipefail
header=$(sed -n 's/.*kVersion = "\([^"]*\)".*/\1/p' "$1")
bzl=$(cat "$2")
[[ -n "$header" && "$header" == "$bzl" ]] ||
  { echo "common/version.h says '$header', bazel/version.bzl says '$bzl'" >&2; exit 1; }
echo "version $header"
