#!/usr/bin/env bash
# Builds the Debian package from the installed tree (install.sh with prefix
# /usr, Debian's multiarch libdir) with dpkg-deb, offline:
#   build_deb.sh --out F.deb --package NAME --conflicts OTHER --flavour TEXT \
#     --unit qr-broker.service --postrm postrm -- <install.sh> <install.sh's arguments>
# Depends are computed from the ELF files' real needs: every NEEDED entry
# must be one of glibc's, libstdc++'s or libgcc's, and the highest GLIBC_ and
# GLIBCXX_ symbol versions give the minimum libc6 and libstdc++6.
set -euo pipefail
out="" package="" conflicts="" flavour="" unit="" postrm=""
while [[ $# -gt 0 && "$1" != "--" ]]; do
  case "$1" in
    --out) out=$2 ;;
    --package) package=$2 ;;
    --conflicts) conflicts=$2 ;;
    --flavour) flavour=$2 ;;
    --unit) unit=$2 ;;
    --postrm) postrm=$2 ;;
    *) echo "build_deb: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
shift  # --
installer=$1; shift
stage=$(mktemp -d "${TMPDIR:-/tmp}/qrdeb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/root
multiarch=lib/x86_64-linux-gnu

"$installer" --prefix=/usr --destdir="$root" --libdir="$multiarch" "$@" >/dev/null
# Debian keeps a package's documents under its own name.
if [[ "$package" != quickreduce ]]; then
  mv "$root/usr/share/doc/quickreduce" "$root/usr/share/doc/$package"
fi
install -d "$root/usr/lib/systemd/user"
sed "s|@PACKAGE@|$package|g" "$unit" >"$root/usr/lib/systemd/user/qr-broker.service"
chmod 0644 "$root/usr/lib/systemd/user/qr-broker.service"

version=$(sed -n 's/^Version: //p' "$root/usr/$multiarch/pkgconfig/quickreduce.pc")
elfs=("$root/usr/bin/qr-broker" "$root/usr/bin/qrctl" "$root/usr/$multiarch/libquickreduce.so.$version")
allowed=" libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1 ld-linux-x86-64.so.2 "
for f in "${elfs[@]}"; do
  for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [[ "$allowed" == *" $n "* ]] || { echo "build_deb: $(basename "$f") needs $n, which Depends does not cover" >&2; exit 1; }
  done
done
max_version() {  # max_version PREFIX: the highest PREFIX_x.y[.z] the ELF files require
  readelf -V -W "${elfs[@]}" | grep -oE "Name: $1_[0-9.]+" | sed "s/Name: $1_//" | sort -V | tail -n 1
}
glibc=$(max_version GLIBC)
glibcxx=$(max_version GLIBCXX)
# libstdc++'s symbol version -> the GCC release whose libstdc++6 has it.
case "$glibcxx" in
  3.4.2[0-8]|3.4.1*|3.4.[0-9]|3.4) gcc=10 ;;
  3.4.29) gcc=11 ;;
  3.4.30) gcc=12 ;;
  *) echo "build_deb: GLIBCXX_$glibcxx: add its GCC release to build_deb.sh" >&2; exit 1 ;;
esac

install -d -m 0755 "$root/DEBIAN"
install -m 0755 "$postrm" "$root/DEBIAN/postrm"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: $package
Version: $version
Architecture: amd64
Maintainer: quickreduce developers <quickreduce@localhost>
Installed-Size: $size
Depends: libc6 (>= $glibc), libstdc++6 (>= $gcc), libgcc-s1
Conflicts: $conflicts
Replaces: $conflicts
Provides: libquickreduce${version%%.*}
Section: libs
Priority: optional
Description: all-reduce between independent processes on one node ($flavour)
 quickreduce forms groups of independent processes through a small broker
 (qr-broker) and all-reduces between them, optionally quantized, over GPU
 IPC or POSIX shared memory. This package holds libquickreduce (C ABI,
 pkg-config and CMake files), qr-broker with a systemd user unit, qrctl and
 the documentation. Flavour: $flavour.
CONTROL
# Owned by root whoever builds it; files as install.sh made them.
dpkg-deb --root-owner-group -Zgzip --build "$root" "$out" >/dev/null
