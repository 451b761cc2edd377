"""What the communicator needs to know about a NumPy array or a torch tensor:
its address, size, element type and where it lives. Imports neither NumPy nor
torch: a value is recognised by the modules it comes from."""

import sys

from ._enums import DType
from .errors import InvalidArgument

ALIGNMENT = 16  # the kernels move 16 bytes at a time, and messages are whole 16-byte units
_TORCH_DTYPES = {}  # torch dtype -> DType, filled on first use


class Buffer:
    __slots__ = ("obj", "kind", "ptr", "nbytes", "count", "dtype", "device", "contiguous")

    def __init__(self, obj, kind, ptr, nbytes, dtype, device, contiguous):
        self.obj = obj
        self.kind = kind          # "numpy" or "torch"
        self.ptr = ptr
        self.nbytes = nbytes
        self.count = nbytes // 2
        self.dtype = dtype        # DType, or None when not fp16/bf16
        self.device = device      # None: host memory; else the CUDA ordinal
        self.contiguous = contiguous

    def problem(self, expect_device, what):
        """Why this buffer cannot take part in a call on `expect_device`, or None."""
        if self.dtype is None:
            return "%s has dtype %s; quickreduce reduces float16 and bfloat16" % (
                what, self.obj.dtype)
        if self.device != expect_device:
            return "%s is on %s but the communicator is on %s" % (
                what, _where(self.device), _where(expect_device))
        if not self.contiguous:
            return "%s is not contiguous" % what
        if self.ptr % ALIGNMENT:
            return "%s's address 0x%x is not %d-byte aligned" % (what, self.ptr, ALIGNMENT)
        if self.nbytes % ALIGNMENT:
            return "%s holds %d bytes, not a multiple of %d" % (what, self.nbytes, ALIGNMENT)
        return None


def _where(device):
    return "the host" if device is None else "cuda:%d" % device


def _numpy_dtype(arr, forced):
    name = arr.dtype.name
    if forced is not None:
        if arr.dtype.itemsize != 2 or name not in ("uint16", "int16", "float16", "bfloat16"):
            raise InvalidArgument("dtype=%s needs 16-bit elements, not %s" % (forced.name, name))
        return forced
    if name == "float16":
        return DType.FLOAT16
    if name == "bfloat16":  # ml_dtypes
        return DType.BFLOAT16
    return None


def describe(obj, dtype=None, what="input"):
    """A Buffer for a NumPy array or torch tensor. `dtype` (a DType) reads
    16-bit integer arrays as that type (bfloat16 bits without ml_dtypes)."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        if not obj.flags.writeable and what == "out":
            raise InvalidArgument("out is read-only")
        return Buffer(obj, "numpy", obj.ctypes.data, obj.nbytes, _numpy_dtype(obj, dtype), None,
                      obj.flags.c_contiguous)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.is_cuda:
            device = obj.get_device()
        elif obj.device.type == "cpu":
            device = None
        else:
            raise InvalidArgument("%s is on %s; quickreduce takes CPU or CUDA tensors"
                                  % (what, obj.device))
        if not _TORCH_DTYPES:
            _TORCH_DTYPES.update({torch.float16: DType.FLOAT16, torch.bfloat16: DType.BFLOAT16})
        d = _TORCH_DTYPES.get(obj.dtype)
        if dtype is not None and d != dtype:
            raise InvalidArgument("%s is %s, not %s" % (what, obj.dtype, dtype.name))
        return Buffer(obj, "torch", obj.data_ptr(), obj.numel() * obj.element_size(), d, device,
                      obj.is_contiguous())
    raise InvalidArgument("%s must be a NumPy array or a torch tensor, not %s"
                          % (what, type(obj).__name__))


def empty_like(buf):
    """A new uninitialised array/tensor like buf (same shape, dtype, device)."""
    if buf.kind == "numpy":
        np = sys.modules["numpy"]
        out = np.empty_like(buf.obj, order="C")
        if out.ctypes.data % ALIGNMENT:  # NumPy aligns large arrays; small ones may not be
            raw = np.empty(buf.nbytes + ALIGNMENT, dtype=np.uint8)
            off = (-raw.ctypes.data) % ALIGNMENT
            out = raw[off:off + buf.nbytes].view(buf.obj.dtype).reshape(buf.obj.shape)
        return out
    torch = sys.modules["torch"]
    return torch.empty_like(buf.obj, memory_format=torch.contiguous_format)
