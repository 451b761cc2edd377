"""Loads libquickreduce.so and declares the C ABI (comm/quickreduce.h) for ctypes.

The library is looked for next to the package (a wheel install), then at
$QR_LIBRARY, then in the Bazel output of the source tree this package sits in.
The packaged qr-broker becomes $QR_BROKER_BIN unless that is set, so that a
client's broker autostart finds it (the library otherwise looks beside the
executable, which for Python is the interpreter).
"""

import ctypes
import os
import threading

from . import errors

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))

QR_DEVICE_HOST = -1
QR_REGIME_CONFIGURED = -1


class JoinOptions(ctypes.Structure):
    _fields_ = [("broker_socket", ctypes.c_char_p), ("group", ctypes.c_char_p),
                ("rank", ctypes.c_int), ("world_size", ctypes.c_int),
                ("device", ctypes.c_int), ("timeout_ms", ctypes.c_int)]


def candidates():
    """Where the library is looked for, in order."""
    out = [os.path.join(_HERE, "libquickreduce.so")]
    if os.environ.get("QR_LIBRARY"):
        out.append(os.environ["QR_LIBRARY"])
    out.append(os.path.join(_REPO, "bazel-bin", "comm", "libquickreduce.so"))
    return out


def _binary(name):
    packaged = os.path.join(_HERE, "bin", name)
    if os.access(packaged, os.X_OK):
        return packaged
    built = {"qr-broker": os.path.join(_REPO, "bazel-bin", "ipc", "broker", "qr-broker"),
             "qrctl": os.path.join(_REPO, "bazel-bin", "tools", "qrctl")}.get(name)
    if built and os.access(built, os.X_OK):
        return built
    return None


def binary(name):
    """The packaged (or built) tool `name` ("qr-broker", "qrctl"), or None."""
    return _binary(name)


_lib = None
_lock = threading.Lock()


def _declare(lib):
    c_int, c_size, c_void, c_char = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
    table = {
        "qr_join": (c_int, [ctypes.POINTER(JoinOptions), ctypes.POINTER(c_void)]),
        "qr_should_all_reduce": (c_int, [c_void, c_size, c_int]),
        "qr_should_all_reduce_ex": (c_int, [c_void, c_size, c_int, c_int, c_int]),
        "qr_all_reduce": (c_int, [c_void, c_void, c_void, c_size, c_int, c_void]),
        "qr_all_reduce_ex": (c_int, [c_void, c_void, c_void, c_size, c_int, c_int, c_int, c_void]),
        "qr_check": (c_int, [c_void]),
        "qr_abort": (c_int, [c_void, c_char]),
        "qr_leave": (c_int, [c_void]),
        "qr_last_error": (c_char, []),
        "qr_status_name": (c_char, [c_int]),
        "qr_comm_rank": (c_int, [c_void]),
        "qr_comm_world_size": (c_int, [c_void]),
        "qr_version": (c_char, []),
        "qr_config_json": (c_char, [c_void]),
        "qr_devices_json": (c_char, []),
        "qr_reference_all_reduce": (c_int, [ctypes.POINTER(c_void), c_int, c_size, c_int, c_int,
                                            c_int, c_void]),
        "qr_reference_check_bound": (c_int, [ctypes.POINTER(c_void), c_int, c_size, c_int, c_int,
                                             c_int, c_void, ctypes.POINTER(ctypes.c_double),
                                             ctypes.POINTER(c_size)]),
        "qr_reference_error_bounds": (c_int, [ctypes.POINTER(c_void), c_int, c_size, c_int,
                                              c_int, c_int, ctypes.POINTER(ctypes.c_double)]),
        "qr_all_reduce_residual_rmsnorm": (c_int, [c_void, c_void, c_void, c_void, c_void, c_void,
                                                   c_size, c_size, ctypes.c_float, c_int, c_int,
                                                   c_int, c_void]),
        "qr_reference_all_reduce_residual_rmsnorm": (
            c_int, [ctypes.POINTER(c_void), c_int, c_void, c_void, c_size, c_size,
                    ctypes.c_float, c_int, c_int, c_int, c_void, c_void]),
        "qr_all_reduce_residual_rmsnorm_fp8": (
            c_int, [c_void, c_void, c_void, c_void, c_void, c_void, c_void, c_void, c_size, c_size,
                    ctypes.c_float, c_int, c_int, c_int, c_void]),
        "qr_reference_all_reduce_residual_rmsnorm_fp8": (
            c_int, [ctypes.POINTER(c_void), c_int, c_void, c_void, c_size, c_size,
                    ctypes.c_float, c_void, c_int, c_int, c_int, c_void, c_void, c_void]),
        "qr_reduce_scatter_ex": (c_int, [c_void, c_void, c_void, c_size, c_int, c_int, c_int,
                                         c_void]),
        "qr_all_gather_ex": (c_int, [c_void, c_void, c_void, c_size, c_int, c_int, c_int, c_void]),
    }
    for name, (res, args) in table.items():
        fn = getattr(lib, name, None)
        if fn is None:
            raise errors.Unsupported(
                "%s lacks %s: it is older than this package (%s)" % (lib._name, name, __name__))
        fn.restype = res
        fn.argtypes = args


def lib():
    """The loaded library (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            tried = []
            for path in candidates():
                if not os.path.exists(path):
                    tried.append(path + " (missing)")
                    continue
                try:
                    loaded = ctypes.CDLL(path)
                except OSError as e:
                    tried.append("%s (%s)" % (path, e))
                    continue
                _declare(loaded)
                broker = _binary("qr-broker")
                if broker and not os.environ.get("QR_BROKER_BIN"):
                    os.environ["QR_BROKER_BIN"] = broker
                _lib = loaded
                break
            else:
                raise errors.Unavailable("libquickreduce.so not found; tried: " + "; ".join(tried))
    return _lib


def path():
    """The path of the loaded library."""
    return lib()._name


def last_error():
    return lib().qr_last_error().decode("utf-8", "replace")


def check_status(code):
    """Raises the exception for a non-OK qr_status, with this thread's last error."""
    if code != 0:
        raise errors.error_for_status(code, last_error())
