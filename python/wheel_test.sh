#!/usr/bin/env bash
# The wheel in a fresh virtual environment (no system site packages, no
# index): it installs, imports from the environment with its own library,
# which needs neither spdlog nor fmt; a group forms with the packaged broker
# started by autostart; `python -m quickreduce status` prints what qrctl
# prints; the vLLM and SGLang entry points and the SGLang .pth hook are in
# place.
#   wheel_test.sh <wheel> <qrctl> <qr-broker>
set -euo pipefail
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
wheel=$(abs "$1") qrctl=$(abs "$2")
tmp=$(mktemp -d /tmp/qrwheel.XXXXXX)
sock=$tmp/run/broker.sock
cleanup() {
  local pid
  pid=$("$qrctl" --socket "$sock" --timeout-ms 500 status 2>/dev/null | awk '/^broker/ {print $3; exit}' | tr -d ,) || true
  [[ -n "${pid:-}" ]] && kill "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

unset QR_LIBRARY QR_BROKER_BIN QR_QRCTL_BIN PYTHONPATH
/usr/bin/python3 -m venv "$tmp/venv"
py=$tmp/venv/bin/python
"$py" -c 'import sys; assert sys.prefix != sys.base_prefix' || fail "not a venv"
"$py" -m pip install --no-index --disable-pip-version-check -q "$wheel"
cd "$tmp"  # nowhere near the source tree

site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
"$py" - "$site" <<'PY' || fail "import from the venv"
import os, sys
import quickreduce as qr
from quickreduce import _lib
site = sys.argv[1]
assert qr.__file__.startswith(site), qr.__file__
assert _lib.path() == os.path.join(site, "quickreduce", "libquickreduce.so"), _lib.path()
assert qr.version() == qr.__version__, (qr.version(), qr.__version__)
assert os.environ["QR_BROKER_BIN"] == os.path.join(site, "quickreduce", "bin", "qr-broker")
print("imported", qr.version(), "from", site)
PY
if ldd "$site/quickreduce/libquickreduce.so" | grep -E 'spdlog|fmt|not found'; then
  fail "the packaged library needs the libraries above"
fi

# Two ranks (threads) with autostart: the packaged broker comes up.
QR_BROKER_SOCKET=$sock "$py" - <<'PY' || fail "group with the packaged broker"
import ctypes
import threading
import quickreduce as qr
out = {}
def rank(r):
    # No NumPy in this environment: the pointer-level call.
    buf = (ctypes.c_uint16 * 64)(*([0x3C00] * 64))  # 1.0 in fp16
    res = (ctypes.c_uint16 * 64)()
    with qr.Communicator("wheel", r, 2, timeout_ms=20000) as c:
        c.all_reduce_ptr(ctypes.addressof(buf), ctypes.addressof(res), 64, "float16",
                         regime="FP")
    out[r] = list(res)
ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
assert out[0] == out[1] == [0x4000] * 64, out   # 2.0
print("group ran with the packaged broker")
PY

# python -m quickreduce status == qrctl status (uptime aside), exit codes too.
norm() { sed -E 's/up [0-9.]+(ms|s|m|h|d)/up T/'; }
set +e
want=$("$qrctl" --socket "$sock" status); want_rc=$?
got=$("$py" -m quickreduce status --socket "$sock"); got_rc=$?
set -e
[[ $want_rc == "$got_rc" ]] || fail "exit codes differ: qrctl $want_rc, python -m quickreduce $got_rc"
[[ "$(norm <<<"$want")" == "$(norm <<<"$got")" ]] || {
  diff <(norm <<<"$want") <(norm <<<"$got") >&2; fail "status output differs"; }
grep -q "broker" <<<"$got" || fail "no broker line: $got"
echo "status matches qrctl (exit $got_rc)"

"$py" - <<'PY' || fail "entry points"
from importlib.metadata import entry_points
eps = entry_points()
def group(name):
    return list(eps.select(group=name) if hasattr(eps, "select") else eps.get(name, []))
for name, value in (("vllm.general_plugins", "quickreduce.integrations.vllm:register"),
                    ("sglang.srt.plugins", "quickreduce.integrations.sglang:register")):
    got = [(e.name, e.value) for e in group(name)]
    assert got == [("quickreduce", value)], (name, got)
    assert callable(group(name)[0].load())
PY
"$py" -c 'import sys; assert "quickreduce" not in sys.modules' || fail ".pth imports quickreduce unasked"
QR_SGLANG=1 "$py" -c 'import sys; assert any(type(f).__name__ == "_Hook" for f in sys.meta_path)' \
  || fail "QR_SGLANG=1 does not arm the SGLang hook"
echo "wheel: OK"
