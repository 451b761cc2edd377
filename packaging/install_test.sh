#!/usr/bin/env bash
# //:install into a temporary prefix, then used as a newcomer outside the
# source tree would: the layout (SONAME and its links, a self-contained
# header), a C program built with `cc $(pkg-config --cflags --libs quickreduce)`
# and a CMake project with find_package(quickreduce REQUIRED), each run as two
# ranks on the host backend against the installed qr-broker (autostart off,
# so no other broker can serve them); qrctl of the install sees the broker.
#   install_test.sh <install.sh> <client.c> <cmake project dir> -- <install.sh's arguments>
set -euo pipefail
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
installer=$(abs "$1") client_c=$(abs "$2") project=$(abs "$3"); shift 3
[[ "$1" == "--" ]] && shift
tmp=$(mktemp -d /tmp/qrinstall.XXXXXX)  # short: the socket path has 107 bytes
prefix=$tmp/prefix
broker_pid=""
cleanup() {
  [[ -n "$broker_pid" ]] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

"$installer" "$@" --prefix="$prefix"
version=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/quickreduce.pc")
major=${version%%.*}

# --- The layout. ---
real=$prefix/lib/libquickreduce.so.$version
[[ -f "$real" && ! -L "$real" ]] || fail "no $real"
[[ "$(readlink "$prefix/lib/libquickreduce.so.$major")" == "libquickreduce.so.$version" ]] ||
  fail "libquickreduce.so.$major does not lead to libquickreduce.so.$version"
[[ "$(readlink "$prefix/lib/libquickreduce.so")" == "libquickreduce.so.$major" ]] ||
  fail "libquickreduce.so does not lead to libquickreduce.so.$major"
soname=$(readelf -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ "$soname" == "libquickreduce.so.$major" ]] || fail "SONAME is '$soname'"
for f in bin/qr-broker bin/qrctl include/quickreduce/quickreduce.h \
         lib/cmake/quickreduce/quickreduceConfig.cmake \
         lib/cmake/quickreduce/quickreduceConfigVersion.cmake \
         share/doc/quickreduce/README.md share/doc/quickreduce/broker.md \
         share/doc/quickreduce/deploy.md; do
  [[ -s "$prefix/$f" ]] || fail "missing $f"
done
[[ -x "$prefix/bin/qr-broker" && -x "$prefix/bin/qrctl" ]] || fail "binaries not executable"
# The header alone, in C and in C++, with no -I but the install's.
echo '#include <quickreduce/quickreduce.h>
int main(void) { return qr_version() == 0; }' >"$tmp/hdr.c"
cc -std=c99 -Wall -Werror -fsyntax-only -I"$prefix/include" "$tmp/hdr.c" || fail "header not self-contained (C)"
c++ -x c++ -Wall -Werror -fsyntax-only -I"$prefix/include" "$tmp/hdr.c" || fail "header not self-contained (C++)"

# --- The installed broker, alone on a private socket. ---
export QR_BROKER_SOCKET=$tmp/run/broker.sock QR_BROKER_AUTOSTART=0
mkdir -m 0700 "$tmp/run"
"$prefix/bin/qr-broker" --socket "$QR_BROKER_SOCKET" 2>"$tmp/broker.log" &
broker_pid=$!
for _ in $(seq 100); do [[ -S "$QR_BROKER_SOCKET" ]] && break; sleep 0.1; done
[[ -S "$QR_BROKER_SOCKET" ]] || { cat "$tmp/broker.log" >&2; fail "installed broker did not listen"; }

two_ranks() {  # two_ranks <program> <group>
  local p0 rc0 rc1
  "$1" "$2" 0 >"$tmp/$2.0.out" 2>&1 & p0=$!
  set +e
  "$1" "$2" 1 >"$tmp/$2.1.out" 2>&1; rc1=$?
  wait "$p0"; rc0=$?
  set -e
  cat "$tmp/$2.0.out" "$tmp/$2.1.out"
  ((rc0 == 0 && rc1 == 0)) || fail "$1: ranks exited $rc0 and $rc1"
  grep -q "quickreduce $version" "$tmp/$2.0.out" || fail "$1 did not report version $version"
}

# --- pkg-config. ---
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[[ "$(pkg-config --modversion quickreduce)" == "$version" ]] || fail "pkg-config --modversion"
libdir=$(pkg-config --variable=libdir quickreduce)
# shellcheck disable=SC2046  # the flags are words
cc -std=c99 -Wall -Werror -o "$tmp/client_pc" "$client_c" $(pkg-config --cflags --libs quickreduce) \
  -Wl,-rpath,"$libdir"
readelf -d "$tmp/client_pc" | grep -q "NEEDED.*\[libquickreduce.so.$major\]" ||
  fail "the program does not load libquickreduce.so.$major"
two_ranks "$tmp/client_pc" pc

# --- CMake. ---
cmake -S "$project" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_RPATH="$prefix/lib" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; fail "cmake configure"; }
cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; fail "cmake build"; }
two_ranks "$tmp/cmake/client" cmake
# ConfigVersion: another major is refused.
if cmake -S "$project" -B "$tmp/cmake_v" -DCMAKE_PREFIX_PATH="$prefix" -DQR_WANT_VERSION=$((major + 1)) \
     >"$tmp/cmake_v.log" 2>&1; then
  fail "find_package(quickreduce $((major + 1))) accepted version $version"
fi

# --- qrctl of the install talks to the installed broker. ---
"$prefix/bin/qrctl" --socket "$QR_BROKER_SOCKET" status >"$tmp/status" || { cat "$tmp/status" >&2; fail "qrctl status"; }
grep -q "broker" "$tmp/status" || fail "qrctl status: $(cat "$tmp/status")"
echo "install: OK ($version under a temporary prefix)"
