#!/usr/bin/env bash
# Installs quickreduce under a prefix, as `make install` would:
#
#   ./bazelw run //:install -- --prefix=$HOME/.local
#
#   PREFIX/lib/libquickreduce.so.X.Y.Z          the library (SONAME libquickreduce.so.X)
#   PREFIX/lib/libquickreduce.so.X -> .X.Y.Z    what programs load
#   PREFIX/lib/libquickreduce.so -> .so.X       what `cc -lquickreduce` links
#   PREFIX/include/quickreduce/quickreduce.h    the C ABI (self-contained)
#   PREFIX/bin/qr-broker, PREFIX/bin/qrctl
#   PREFIX/lib/pkgconfig/quickreduce.pc
#   PREFIX/lib/cmake/quickreduce/quickreduceConfig.cmake (+ ConfigVersion):
#                                               the imported target quickreduce::quickreduce
#   PREFIX/share/doc/quickreduce/               README.md and docs/*.md
#
# The C++ API (comm/communicator.h) is not installed: it includes internal
# headers and the library exports the C ABI only (comm/libquickreduce.lds).
#
# Options: --prefix DIR (required; relative to where `bazel run` was started),
# --destdir DIR (staged install, as DESTDIR: files go to DESTDIR/PREFIX but
# refer to PREFIX), --libdir REL (default lib; Debian's lib/x86_64-linux-gnu).
# The inputs (--lib, --broker, --qrctl, --header, --version-header, --pc-in,
# --cmake-in, --cmake-version-in, and the documents as plain arguments) come
# from the BUILD rule.
set -euo pipefail

prefix="" destdir="" libdir=lib lib="" broker="" qrctl="" header="" version_header=""
pc_in="" cmake_in="" cmake_version_in=""
docs=()
while (($#)); do
  arg=$1; shift
  case "$arg" in
    --*=*) val=${arg#*=}; arg=${arg%%=*} ;;
    --*) (($#)) || { echo "install: $arg needs a value" >&2; exit 2; }; val=$1; shift ;;
    *) docs+=("$arg"); continue ;;
  esac
  case "$arg" in
    --prefix) prefix=$val ;;
    --destdir) destdir=$val ;;
    --libdir) libdir=$val ;;
    --lib) lib=$val ;;
    --broker) broker=$val ;;
    --qrctl) qrctl=$val ;;
    --header) header=$val ;;
    --version-header) version_header=$val ;;
    --pc-in) pc_in=$val ;;
    --cmake-in) cmake_in=$val ;;
    --cmake-version-in) cmake_version_in=$val ;;
    *) echo "install: unknown option $arg" >&2; exit 2 ;;
  esac
done
[[ -n "$prefix" ]] || { echo "install: --prefix=DIR is required (e.g. ./bazelw run //:install -- --prefix=\$HOME/.local)" >&2; exit 2; }
for v in lib broker qrctl header version_header pc_in cmake_in cmake_version_in; do
  [[ -n "${!v}" && -f "${!v}" ]] || { echo "install: --${v//_/-} is missing or not a file: '${!v}'" >&2; exit 2; }
done

# Relative paths are the user's: `bazel run` starts us in the runfiles tree.
if [[ "$prefix" != /* ]]; then prefix="${BUILD_WORKING_DIRECTORY:-$PWD}/$prefix"; fi
if [[ -n "$destdir" && "$destdir" != /* ]]; then destdir="${BUILD_WORKING_DIRECTORY:-$PWD}/$destdir"; fi
prefix=${prefix%/}
[[ "$libdir" != /* && "$libdir" != *..* ]] || { echo "install: --libdir must be relative to the prefix" >&2; exit 2; }

version=$(sed -n 's/.*kVersion = "\([0-9][0-9.]*\)".*/\1/p' "$version_header")
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "install: no X.Y.Z kVersion in $version_header" >&2; exit 1; }
major=${version%%.*}
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
# The SONAME names the C ABI's major version; a library without one, or of
# another major, would install links that programs never load.
[[ "$soname" == "libquickreduce.so.$major" ]] ||
  { echo "install: $lib has SONAME '$soname', expected libquickreduce.so.$major" >&2; exit 1; }

root="$destdir$prefix"
install -d "$root/bin" "$root/include/quickreduce" "$root/$libdir/pkgconfig" \
  "$root/$libdir/cmake/quickreduce" "$root/share/doc/quickreduce"
install -m 0644 "$lib" "$root/$libdir/libquickreduce.so.$version"
ln -sfn "libquickreduce.so.$version" "$root/$libdir/$soname"
ln -sfn "$soname" "$root/$libdir/libquickreduce.so"
install -m 0755 "$broker" "$root/bin/qr-broker"
install -m 0755 "$qrctl" "$root/bin/qrctl"
install -m 0644 "$header" "$root/include/quickreduce/quickreduce.h"
for d in "${docs[@]}"; do
  install -m 0644 "$d" "$root/share/doc/quickreduce/$(basename "$d")"
done

# The CMake files find the prefix from their own place (relocatable); the
# .pc file names it, as pkg-config files do.
up=$(awk -F/ '{ s = ""; for (i = 1; i <= NF + 2; i++) s = s "/.."; print substr(s, 2) }' <<<"$libdir")
subst() {
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$libdir|g" -e "s|@VERSION@|$version|g" \
      -e "s|@SONAME@|$soname|g" -e "s|@MAJOR@|$major|g" -e "s|@PREFIX_FROM_CMAKE_DIR@|$up|g" "$1" >"$2"
  chmod 0644 "$2"
}
subst "$pc_in" "$root/$libdir/pkgconfig/quickreduce.pc"
subst "$cmake_in" "$root/$libdir/cmake/quickreduce/quickreduceConfig.cmake"
subst "$cmake_version_in" "$root/$libdir/cmake/quickreduce/quickreduceConfigVersion.cmake"
echo "installed quickreduce $version under $root"
