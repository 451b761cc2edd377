"""The safetensors file format by hand (NumPy only), for machines without the
`safetensors` module (CI's Debian): an 8-byte little-endian header length, a
JSON header naming each tensor's dtype, shape and byte range, then the raw
little-endian tensors. Files written here load with `safetensors` and
transformers; files written by them load here."""

import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "U8": np.uint8, "BF16": np.uint16}  # BF16: the raw bits, widened on read
_NAMES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
          np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8"}


def write(path, tensors, metadata=None):
    """Writes {name: NumPy array} (float32, float16 or integer) to `path`."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        if a.dtype not in _NAMES:
            raise ValueError(f"{name}: dtype {a.dtype} is not supported")
        data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _NAMES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def read(path):
    """{name: NumPy array}; BF16 tensors come back as float32 (exactly)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        if d["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: {name} has dtype {d['dtype']}, not supported here")
        begin, end = d["data_offsets"]
        a = np.frombuffer(raw[base + begin:base + end],
                          dtype=np.dtype(_DTYPES[d["dtype"]]).newbyteorder("<"))
        if d["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.astype(a.dtype.newbyteorder("="), copy=True).reshape(d["shape"])
    return out
