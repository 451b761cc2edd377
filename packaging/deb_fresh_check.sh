#!/usr/bin/env bash
# Run by .ci/steps/fresh_debian.sh inside its fresh Debian root, as root,
# after `./bazelw test //...` (which built the package): what a user of the
# .deb does, and what dpkg leaves afterwards.
#   1. dpkg -i the package of the flavour ./bazelw builds;
#   2. systemd-analyze verify its user unit (systemd installed for it);
#   3. a C program built with `cc $(pkg-config --cflags --libs quickreduce)`
#      runs two ranks through the packaged broker, which a client autostarts
#      from $PATH (/usr/bin/qr-broker);
#   4. `systemctl --global enable` the unit, then dpkg --purge: no file under
#      /usr, /etc or /var/lib differs from before the install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
say() { echo "deb_fresh_check: $*"; }
fail() { echo "deb_fresh_check: FAILED: $*" >&2; exit 1; }

# QR_DEB: a package built elsewhere (trying this script out of CI).
if [[ -n "${QR_DEB:-}" ]]; then
  debs=("$QR_DEB")
else
  ./bazelw build //:deb 2>/dev/null
  debs=("$(./bazelw info bazel-bin 2>/dev/null)"/packaging/*_amd64.deb)
fi
(( ${#debs[@]} == 1 )) && [[ -f "${debs[0]}" ]] || fail "expected one package, found: ${debs[*]}"
deb=${debs[0]}
package=$(dpkg-deb --field "$deb" Package)
say "package $(basename "$deb")"

if ! command -v systemd-analyze >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi

snapshot() {
  find /usr /etc /var/lib -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/lib/systemd \) -prune \
    -o -printf '%p %y %m\n' | sort
}
snapshot >/tmp/before.txt
dpkg -i "$deb"

# 2. The unit as systemd reads it: any message (unknown key, missing
# binary, bad specifier) fails.
export XDG_RUNTIME_DIR; XDG_RUNTIME_DIR=$(mktemp -d /tmp/xdg.XXXXXX)
out=$(systemd-analyze --user verify /usr/lib/systemd/user/qr-broker.service 2>&1) || fail "systemd-analyze verify: $out"
[[ -z "$out" ]] || fail "systemd-analyze verify: $out"
say "systemd-analyze --user verify: clean"
unset XDG_RUNTIME_DIR

# 3. A C client through the packaged broker, autostarted from $PATH.
cc -std=c99 -Wall -Werror -o /tmp/qr_client packaging/testdata/client.c $(pkg-config --cflags --libs quickreduce)
unset QR_BROKER_BIN
# A socket of its own: a broker left on the default socket (the README's
# demo runs before this in the fresh root) would serve the clients instead
# of the packaged one.
export QR_BROKER_SOCKET; QR_BROKER_SOCKET=$(mktemp -d /tmp/qr-deb.XXXXXX)/broker.sock
/tmp/qr_client deb 0 & p0=$!
/tmp/qr_client deb 1 || fail "rank 1"
wait "$p0" || fail "rank 0"
pid=$(qrctl status | awk '/^broker/ { print $3; exit }' | tr -d ,)
[[ -n "$pid" && "$(readlink "/proc/$pid/exe")" == /usr/bin/qr-broker ]] ||
  fail "the broker (pid '$pid') is not the packaged one: $(readlink "/proc/$pid/exe" 2>/dev/null)"
say "two ranks ran through /usr/bin/qr-broker (pid $pid)"
kill "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
rm -rf "${QR_BROKER_SOCKET%/*}"
unset QR_BROKER_SOCKET

# 4. Purge leaves nothing, also after an administrator enabled the unit.
systemctl --global enable qr-broker.service
[[ -L /etc/systemd/user/default.target.wants/qr-broker.service ]] || fail "systemctl --global enable made no link"
dpkg --purge "$package"
snapshot >/tmp/after.txt
if ! diff /tmp/before.txt /tmp/after.txt; then
  fail "the install and purge changed the files above"
fi
rm -f /tmp/qr_client /tmp/before.txt /tmp/after.txt
say "purge left nothing behind"
