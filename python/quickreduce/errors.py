"""Exceptions: one per qr_status of the C ABI, all under QuickReduceError."""

__all__ = [
    "QuickReduceError", "InvalidArgument", "Unavailable", "Timeout", "PeerFailed",
    "Unsupported", "AlreadyExists", "Internal", "error_for_status",
]


class QuickReduceError(Exception):
    """A quickreduce call failed. `status` is the C status name ("QR_PEER_FAILED", ...);
    the message is the library's qr_last_error() text (or the Python layer's own)."""

    status = "QR_UNKNOWN"

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgument(QuickReduceError, ValueError):
    """Bad argument or environment (QR_INVALID_ARGUMENT); raised before anything is sent."""
    status = "QR_INVALID_ARGUMENT"


class Unavailable(QuickReduceError):
    """No broker answered and none could be started (QR_UNAVAILABLE)."""
    status = "QR_UNAVAILABLE"


class Timeout(QuickReduceError, TimeoutError):
    """A join or a data-path wait ran out (QR_TIMEOUT)."""
    status = "QR_TIMEOUT"


class PeerFailed(QuickReduceError):
    """A member died or the group was aborted (QR_PEER_FAILED)."""
    status = "QR_PEER_FAILED"


class Unsupported(QuickReduceError):
    """A valid request this build, device or group cannot serve (QR_UNSUPPORTED)."""
    status = "QR_UNSUPPORTED"


class AlreadyExists(QuickReduceError):
    """The rank is taken or the device is already in the group (QR_ALREADY_EXISTS)."""
    status = "QR_ALREADY_EXISTS"


class Internal(QuickReduceError):
    """A platform or library failure (QR_INTERNAL)."""
    status = "QR_INTERNAL"


# Indexed by the qr_status value (comm/quickreduce.h).
_BY_CODE = {1: InvalidArgument, 2: Unavailable, 3: Timeout, 4: PeerFailed, 5: Unsupported,
            6: AlreadyExists, 7: Internal}


def error_for_status(code, message):
    """The exception for a non-OK qr_status `code` with `message`."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return QuickReduceError(message or "qr_status %d" % code, "QR_UNKNOWN")
    return cls(message)
