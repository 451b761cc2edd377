#!/usr/bin/env bash
# libquickreduce.so from another language through FFI (Python ctypes): the C
# ABI's functions resolve by name and behave as documented without any C++
# in the caller. Needs python3 (present wherever Bazel's own tooling runs).
set -euo pipefail
lib="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
python3 - "$lib" <<'PY'
import ctypes, sys

lib = ctypes.CDLL(sys.argv[1])
lib.qr_status_name.restype = ctypes.c_char_p
lib.qr_last_error.restype = ctypes.c_char_p
lib.qr_join.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
lib.qr_should_all_reduce.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
lib.qr_check.argtypes = [ctypes.c_void_p]
lib.qr_leave.argtypes = [ctypes.c_void_p]


class JoinOptions(ctypes.Structure):
    _fields_ = [("broker_socket", ctypes.c_char_p), ("group", ctypes.c_char_p),
                ("rank", ctypes.c_int), ("world_size", ctypes.c_int),
                ("device", ctypes.c_int), ("timeout_ms", ctypes.c_int)]


def expect(cond, what):
    if not cond:
        sys.exit("FAILED: %s (last error: %s)" % (what, lib.qr_last_error()))


expect(lib.qr_status_name(4) == b"QR_PEER_FAILED", "qr_status_name(4)")
comm = ctypes.c_void_p(1)
expect(lib.qr_join(None, ctypes.byref(comm)) == 1, "qr_join(NULL) is QR_INVALID_ARGUMENT")
expect(comm.value is None, "qr_join sets *out to NULL on failure")
expect(b"opts" in lib.qr_last_error(), "qr_last_error names the argument")
opts = JoinOptions(None, b"ffi", 0, 3, -1, 100)
expect(lib.qr_join(ctypes.byref(opts), ctypes.byref(comm)) == 1, "world size 3 is refused")
expect(b"world size" in lib.qr_last_error(), "qr_last_error explains the world size")
expect(lib.qr_should_all_reduce(None, 1 << 20, 0) == 0, "qr_should_all_reduce(NULL)")
expect(lib.qr_check(None) == 1, "qr_check(NULL)")
expect(lib.qr_leave(None) == 0, "qr_leave(NULL)")
print("ffi: OK")
PY
