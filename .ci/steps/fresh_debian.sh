#!/usr/bin/env bash
# ---- fresh Debian 12: the README's two commands on a new machine ----
# A minbase bookworm root (debootstrap; no CUDA toolkit, no GoogleTest, no
# compiler), a clone of this checkout's committed HEAD in it, and inside it by
# chroot exactly what the README tells a new user to run:
#   ./bazelw run //:demo && ./bazelw test //...
# and then packaging/deb_fresh_check.sh (dpkg -i the .deb that build made,
# a C client through its broker, systemd-analyze verify, purge), so
# ./bazelw must install every package the build and the tests use, and must
# build the host-only flavour on its own. Needs root (debootstrap,
# mount, chroot); runs in a private mount namespace, and unmounts everything
# on every way out.
#
# Cached under $QR_CI_CACHE (default /var/cache/quickreduce-ci), shared by the
# runs on one machine:
#   bookworm-minbase.tar.gz (+ .sha256)  the bootstrapped root, rebuilt when
#                                        missing, corrupt or older than 30 days
#   apt-archives/                        the .debs apt fetched in the chroot
#   fresh_debian.log                     the last run's whole output
# Every run unpacks a new root from the tarball into a tmpfs (up to
# $QR_CI_ROOT_SIZE, default 16g; about 5 GiB are used) that is gone afterwards.
# The Bazel output tree is never cached: a cache hit would hide a header that
# is missing on a fresh machine.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
suite=bookworm
cache=${QR_CI_CACHE:-/var/cache/quickreduce-ci}

if [[ -z "${QR_CI_FRESH_NS:-}" ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "fresh_debian: needs root (debootstrap, mount, chroot)" >&2
    exit 1
  fi
  for tool in debootstrap unshare chroot git; do
    command -v "$tool" >/dev/null || { echo "fresh_debian: $tool is missing" >&2; exit 1; }
  done
  # Private mounts: nothing mounted below the root can propagate to the host's
  # /dev or /proc, and the kernel drops them all if this script is killed.
  export QR_CI_FRESH_NS=1
  exec unshare --mount --propagation private bash "${BASH_SOURCE[0]}" "$@"
fi

start=$SECONDS
say() { echo "fresh_debian: $*"; }

# The URI this machine's apt uses for `suite` (deb822 .sources and one-line
# .list files); empty when none.
apt_mirror() {
  local want="$1" f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r "$f" ]] || continue
    awk -v want="$want" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled != "no") {
          n = split(suites, s, " ")
          for (i = 1; i <= n; i++) if (s[i] == want) { split(uris, u, " "); print u[1]; found = 1; exit }
        }
        types = uris = suites = ""; enabled = "yes"
      }
      BEGIN { enabled = "yes" }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      { key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
        if (key == "types") types = $0; else if (key == "uris") uris = $0
        else if (key == "suites") suites = $0; else if (key == "enabled") enabled = tolower($0) }
      END { if (!found) flush() }' "$f"
  done | head -n 1 | grep . && return 0
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -r "$f" ]] || continue
    sed -E 's/\[[^]]*\]//' "$f" | awk -v want="$want" '$1 == "deb" && $3 == want { print $2; exit }'
  done | head -n 1
}

mirror=$(apt_mirror "$suite" || true)
if [[ -z "$mirror" ]]; then
  mirror=http://deb.debian.org/debian
  say "no $suite source in /etc/apt; using $mirror"
fi
security=$(apt_mirror "$suite-security" || true)
updates=$(apt_mirror "$suite-updates" || true)
say "mirror $mirror${updates:+, updates $updates}${security:+, security $security}"

# --- The cached root tarball. ---
mkdir -p "$cache/apt-archives/partial"
# One run at a time per machine: they share the tarball, the .debs (and
# apt's lock on them) and the log.
exec 9>"$cache/lock"
if ! flock -n 9; then
  say "waiting for another run to finish with $cache"
  flock 9
fi
tarball="$cache/$suite-minbase.tar.gz"
tarball_ok() {
  [[ -s "$tarball" && -s "$tarball.sha256" ]] &&
    [[ -z $(find "$tarball" -mtime +30) ]] &&
    (cd "$cache" && sha256sum --quiet --status -c "$(basename "$tarball").sha256")
}
if ! tarball_ok; then
  say "bootstrapping a $suite minbase root (cache missing, corrupt or old)"
  rm -f "$tarball" "$tarball.sha256"
  build=$(mktemp -d "$cache/bootstrap.XXXXXX")
  # Only this block's directory; the namespace drops debootstrap's mounts.
  trap 'rm -rf --one-file-system "$build"' EXIT
  debootstrap --variant=minbase --arch=amd64 "$suite" "$build/root" "$mirror" >"$build/log" 2>&1 ||
    { tail -n 30 "$build/log"; exit 1; }
  tar -C "$build/root" --numeric-owner -czf "$build/root.tar.gz" .
  mv "$build/root.tar.gz" "$tarball"
  (cd "$cache" && sha256sum "$(basename "$tarball")" >"$(basename "$tarball").sha256")
  rm -rf --one-file-system "$build"
  trap - EXIT
  say "root tarball cached ($(du -h "$tarball" | cut -f1), $((SECONDS - start)) s)"
fi

# --- A new root, the mounts, and their undoing on every way out. ---
work=$(mktemp -d /var/tmp/quickreduce-fresh.XXXXXX)
root="$work/root"
mounts=()  # innermost last

mount_in_root() {  # mount_in_root <target below root> <mount args...>
  local target="$root${1:+/$1}"; shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounts+=("$target")
}

# Processes whose root is the chroot (a Bazel server, a broker a test
# started) keep its mounts busy: end them by pid.
end_chroot_processes() {
  local p r pids=()
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    [[ "$r" == "$root" ]] && pids+=("${p#/proc/}")
  done
  (( ${#pids[@]} )) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  sleep 1
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

# CPU seconds spent in the root by the Bazel server and its actions (the
# server is no child of this script; its reaped actions count in cutime).
bazel_cpu() {
  local p r f total=0
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    [[ "$r" == "$root" ]] || continue
    read -r -a f < <(sed 's/.*) //' "$p/stat" 2>/dev/null) || continue
    total=$((total + f[11] + f[12] + f[13] + f[14]))  # utime stime cutime cstime
  done
  echo $((total / $(getconf CLK_TCK)))
}

cleanup() {
  local rc=$? i left cpu
  trap - EXIT INT TERM HUP
  # The wall time depends on what else runs; the CPU time says what the step
  # costs (over 2 cores, at least half of it is wall time).
  cpu=$(bazel_cpu)
  times >"$work/times"
  cpu=$((cpu + $(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
                               printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$work/times")))
  if [[ -d "$root/src/quickreduce" && -x "$root/usr/bin/bazel" ]]; then
    chroot "$root" /bin/sh -c 'cd /src/quickreduce && bazel shutdown' >/dev/null 2>&1 || true
  fi
  end_chroot_processes
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true
  done
  left=$(awk -v r="$root" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo)
  if [[ -n "$left" ]]; then
    say "still mounted, root kept at $root: $left"
    rc=1
  else
    rm -rf --one-file-system "$work"
  fi
  say "$( ((rc == 0)) && echo passed || echo FAILED) in $((SECONDS - start)) s" \
    "(CPU ${cpu} s; load average $(cut -d' ' -f1-3 /proc/loadavg))"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# The root lives in memory: unpacking, dpkg and the build write a few GiB
# that no disk needs to keep, and undoing it is one umount.
mount_in_root "" -t tmpfs -o "size=${QR_CI_ROOT_SIZE:-16g},mode=0755" tmpfs
tar -C "$root" --numeric-owner -xzf "$tarball"
# As Debian's container images: dpkg skips fsync and documentation, which
# changes nothing the build sees.
cat >"$root/etc/dpkg/dpkg.cfg.d/ci" <<'EOF_DPKG'
force-unsafe-io
path-exclude=/usr/share/doc/*
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
EOF_DPKG

{
  echo "deb $mirror $suite main"
  [[ -n "$updates" ]] && echo "deb $updates $suite-updates main"
  [[ -n "$security" ]] && echo "deb $security $suite-security main"
} >"$root/etc/apt/sources.list"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The .debs outlive the root, so later runs download nothing new; apt still
# installs every package.
rm -rf "$root/var/cache/apt/archives"

mount_in_root proc -t proc proc
mount_in_root sys -t sysfs sysfs
mount_in_root dev --bind /dev
mount_in_root dev/shm -t tmpfs -o mode=1777,nosuid,nodev tmpfs
mount_in_root var/cache/apt/archives --bind "$cache/apt-archives"

# The committed HEAD of the checkout running CI, not its working tree.
head=$(git -C "$repo" rev-parse HEAD)
git clone --quiet --no-checkout "$repo" "$root/src/quickreduce"
git -C "$root/src/quickreduce" checkout --quiet --detach "$head"
say "root ready at $root, quickreduce $(git -C "$repo" rev-parse --short HEAD) ($((SECONDS - start)) s)"

[[ ! -e "$root/usr/local/cuda" ]] || { say "the root has a CUDA toolkit"; exit 1; }
# Each README command on its own, timed. dpkg's per-package lines are left
# out of this output (the whole of it is in $cache/fresh_debian.log).
log="$cache/fresh_debian.log"
: >"$log"
in_root() {
  local t=$SECONDS rc
  say "in the root: $1"
  set +e
  env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 TERM=dumb \
    chroot "$root" /bin/bash -c "cd /src/quickreduce && $1" 2>&1 | tee -a "$log" |
    grep --line-buffered -vE '^(Selecting previously|Preparing to unpack|Unpacking|Setting up|Processing triggers|Adding debian:|\(Reading database)'
  rc=${PIPESTATUS[0]}
  set -e
  say "$1: $( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)") in $((SECONDS - t)) s"
  return "$rc"
}
in_root "./bazelw run //:demo"
in_root "./bazelw test //..."
# The Debian package of that build: installed, used through its broker,
# its systemd unit verified, purged without a trace.
in_root "bash packaging/deb_fresh_check.sh"
