#!/usr/bin/env bash
# The Debian package as dpkg sees it, without installing it (the fresh-Debian
# CI step installs, uses and purges it): named per flavour, every file under
# /usr, the library with its SONAME links in the multiarch directory, the
# user unit, the postrm, Depends covering what the ELF files need, and a
# pkg-config file that points at /usr.
#   deb_test.sh <deb>
set -euo pipefail
deb=$1
fail() { echo "FAILED: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/qrdebtest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

field() { dpkg-deb --field "$deb" "$1"; }
package=$(field Package) version=$(field Version)
case "$package" in
  quickreduce) other=quickreduce-host ;;
  quickreduce-host) other=quickreduce ;;
  *) fail "package name '$package'" ;;
esac
[[ "$(basename "$deb")" == "${package}_${version}_amd64.deb" ]] || fail "file name $(basename "$deb")"
[[ "$(field Architecture)" == amd64 ]] || fail "architecture"
[[ "$(field Conflicts)" == "$other" && "$(field Replaces)" == "$other" ]] || fail "does not conflict with $other"
depends=$(field Depends)
[[ "$depends" =~ libc6\ \(\>=\ 2\.[0-9]+\) && "$depends" == *libstdc++6* && "$depends" == *libgcc-s1* ]] ||
  fail "Depends: $depends"

# Every path under /usr (nothing in /etc, /var, /opt), owned by root.
dpkg-deb --contents "$deb" >"$tmp/contents"
awk '{ print $6 }' "$tmp/contents" | grep -vE '^\./(usr(/.*)?)?$' && fail "files outside /usr"
awk '$2 != "root/root" { print; bad = 1 } END { exit bad }' "$tmp/contents" || fail "files not owned by root"
multiarch=usr/lib/x86_64-linux-gnu
major=${version%%.*}
for f in "$multiarch/libquickreduce.so.$version" "$multiarch/libquickreduce.so.$major" \
         "$multiarch/libquickreduce.so" "$multiarch/pkgconfig/quickreduce.pc" \
         "$multiarch/cmake/quickreduce/quickreduceConfig.cmake" \
         "$multiarch/cmake/quickreduce/quickreduceConfigVersion.cmake" \
         usr/bin/qr-broker usr/bin/qrctl usr/include/quickreduce/quickreduce.h \
         usr/lib/systemd/user/qr-broker.service "usr/share/doc/$package/deploy.md"; do
  grep -qE " \./$f( -> .*)?$" "$tmp/contents" || fail "missing /$f"
done

dpkg-deb --extract "$deb" "$tmp/x"
dpkg-deb --control "$deb" "$tmp/ctl"
[[ -x "$tmp/ctl/postrm" ]] || fail "no postrm"
grep -q 'purge' "$tmp/ctl/postrm" || fail "postrm does nothing on purge"
sh -n "$tmp/ctl/postrm" || fail "postrm is not valid sh"
grep -qx 'prefix=/usr' "$tmp/x/$multiarch/pkgconfig/quickreduce.pc" || fail "pkg-config prefix"
grep -qx "libdir=\${prefix}/lib/x86_64-linux-gnu" "$tmp/x/$multiarch/pkgconfig/quickreduce.pc" || fail "pkg-config libdir"
soname=$(readelf -d "$tmp/x/$multiarch/libquickreduce.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ "$soname" == "libquickreduce.so.$major" ]] || fail "SONAME $soname"
unit=$tmp/x/usr/lib/systemd/user/qr-broker.service
grep -qx 'ExecStart=/usr/bin/qr-broker --socket %t/quickreduce/broker.sock' "$unit" || fail "ExecStart"
grep -qx 'RuntimeDirectoryMode=0700' "$unit" || fail "runtime directory mode"
grep -q "@PACKAGE@" "$unit" && fail "unsubstituted @PACKAGE@ in the unit"
# The packaged binaries run (they need nothing the Depends line lacks).
"$tmp/x/usr/bin/qrctl" --help >/dev/null || fail "qrctl --help"
"$tmp/x/usr/bin/qr-broker" --help >/dev/null || fail "qr-broker --help"
echo "deb: OK ($package $version, $(wc -l <"$tmp/contents") entries; Depends: $depends)"
