"""Communicator: one rank's membership in a quickreduce group (qr_join ... qr_leave)."""

import ctypes
import json
import sys
import threading
import weakref

from . import _lib
from ._buffers import describe, empty_like
from ._enums import DType, Regime
from .errors import InvalidArgument

__all__ = ["Communicator", "lookup", "register_fallback", "fallback_for"]

# Communicators by name (default: the group), for the torch ops, which take a
# string: Dynamo cannot pass arbitrary objects into a custom op. A list per
# name, so that ranks of one group as threads of one process are told apart
# only when asked for by name.
_registry = {}
_registry_lock = threading.Lock()


# torch.distributed process groups the torch ops fall back to, by group name.
_fallbacks = {}


def lookup(name):
    """The open Communicator of this process named `name`, or None. Raises
    InvalidArgument when several are open under that name."""
    with _registry_lock:
        live = [c for c in (r() for r in _registry.get(name, ())) if c is not None and not c.closed]
    if len(live) > 1:
        raise InvalidArgument(
            "%d communicators named %r are open in this process (ranks as threads?): give "
            "each its own with Communicator(..., name=...)" % (len(live), name))
    return live[0] if live else None


def _register(name, comm):
    with _registry_lock:
        refs = [r for r in _registry.get(name, ()) if r() is not None]
        refs.append(weakref.ref(comm))
        _registry[name] = refs


def _unregister(name, comm):
    with _registry_lock:
        refs = [r for r in _registry.get(name, ()) if r() is not None and r() is not comm]
        if refs:
            _registry[name] = refs
        else:
            _registry.pop(name, None)


def register_fallback(group, process_group):
    """Makes the torch ops for `group` fall back to torch.distributed.all_reduce
    on `process_group` when quickreduce declines a tensor (or no communicator
    of that name is open). process_group=None removes the fallback."""
    if process_group is None:
        _fallbacks.pop(group, None)
    else:
        _fallbacks[group] = process_group


def fallback_for(group):
    """The process group registered for `group`, or None."""
    return _fallbacks.get(group)


def _cuda_stream(device):
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:  # ~0.1 us against ~6 us for current_stream().cuda_stream
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


def _device_ordinal(device):
    if device is None:
        return None
    if isinstance(device, bool):
        raise InvalidArgument("device must be None, a GPU ordinal or a torch.device")
    if isinstance(device, int):
        if device < 0:
            raise InvalidArgument("device %d is not a GPU ordinal (None is the host backend)"
                                  % device)
        return device
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(device, (torch.device, str)):
        d = torch.device(device)
        if d.type == "cpu":
            return None
        if d.type == "cuda":
            return d.index if d.index is not None else torch.cuda.current_device()
        raise InvalidArgument("device %s is neither CPU nor CUDA" % d)
    if isinstance(device, str) and device == "cpu":
        return None
    raise InvalidArgument("device must be None, a GPU ordinal or a torch.device, not %r"
                          % (device,))


class Communicator:
    """Joins group `group` as `rank` of `world_size` (2, 4 or 8) and keeps the
    membership until close(). `device`: None (host backend: NumPy arrays and CPU
    tensors), a GPU ordinal or a torch.device (CUDA tensors, enqueued on torch's
    current stream). Blocks until every rank has joined (timeout_ms; <= 0:
    $QR_JOIN_TIMEOUT_MS or 60 s). The configuration is read from the
    environment at join. One communicator must not be used by two threads at
    once; distinct ones are independent. `name` (default: the group) is what
    the torch ops take to find it.

    As a context manager it closes on exit; leaving by an exception first
    aborts the group with the exception's text, so peers fail at once."""

    def __init__(self, group, rank, world_size, device=None, *, broker_socket=None, timeout_ms=0,
                 name=None):
        self._c = None
        if name is not None and not isinstance(name, str):
            raise InvalidArgument("name must be a str, not %r" % (name,))
        if not isinstance(group, str):
            raise InvalidArgument("group must be a str, not %r" % (group,))
        for what, v in (("rank", rank), ("world_size", world_size), ("timeout_ms", timeout_ms)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise InvalidArgument("%s must be an int, not %r" % (what, v))
        self._device = _device_ordinal(device)
        lib = _lib.lib()
        opts = _lib.JoinOptions(broker_socket.encode() if broker_socket else None, group.encode(),
                                rank, world_size,
                                _lib.QR_DEVICE_HOST if self._device is None else self._device,
                                timeout_ms)
        handle = ctypes.c_void_p()
        _lib.check_status(lib.qr_join(ctypes.byref(opts), ctypes.byref(handle)))
        self._c = handle
        self._lib = lib
        self._group = group
        self._rank = rank
        self._world_size = world_size
        self._config = json.loads(lib.qr_config_json(handle).decode())
        self._default_regime = Regime[self._config["regime"]]
        self._default_cast = bool(self._config["cast_bf16_to_fp16"])
        self._name = name or group
        _register(self._name, self)

    # --- properties ---
    @property
    def group(self):
        return self._group

    @property
    def name(self):
        """The name the torch ops find this communicator by (default: the group)."""
        return self._name

    @property
    def rank(self):
        return self._rank

    @property
    def world_size(self):
        return self._world_size

    @property
    def device(self):
        """None for the host backend, else the GPU ordinal."""
        return self._device

    @property
    def closed(self):
        return self._c is None

    @property
    def healthy(self):
        """True while the group is healthy (qr_check is OK); never blocks, never raises."""
        return self._c is not None and self._lib.qr_check(self._c) == 0

    @property
    def config(self):
        """This communicator's effective configuration (read at its join) as a dict."""
        return dict(self._config)

    # --- calls ---
    def _handle(self, what):
        if self._c is None:
            raise InvalidArgument("%s: the communicator is closed" % what)
        return self._c

    def _regime_cast(self, regime, cast_bf16_to_fp16):
        r = self._default_regime if regime is None else Regime.parse(regime)
        cast = self._default_cast if cast_bf16_to_fp16 is None else bool(cast_bf16_to_fp16)
        return r, cast

    def should_all_reduce(self, x, *, regime=None, cast_bf16_to_fp16=None, dtype=None):
        """True when all_reduce(x) with these arguments would run quickreduce:
        x is a float16/bfloat16 array or tensor on this communicator's device,
        contiguous, 16-byte aligned, and qr_should_all_reduce's rule holds
        (size limits of the regime). A pure function of x and the
        configuration, never of the group's health: after a peer dies every
        rank answers as before, and all_reduce itself raises PeerFailed /
        Timeout (ranks answering differently would route one call to
        different backends, and one would hang). False once closed. Never
        raises for a tensor it would refuse; never blocks."""
        if self._c is None:
            return False
        try:
            buf = describe(x, DType.parse(dtype) if dtype is not None else None)
        except InvalidArgument:
            return False
        if buf.problem(self._device, "x") is not None:
            return False
        if regime is None and cast_bf16_to_fp16 is None:
            return self._lib.qr_should_all_reduce(self._c, buf.nbytes, int(buf.dtype)) == 1
        r, cast = self._regime_cast(regime, cast_bf16_to_fp16)
        return self._lib.qr_should_all_reduce_ex(self._c, buf.nbytes, int(buf.dtype), int(r),
                                                 int(cast)) == 1

    def all_reduce(self, x, out=None, *, regime=None, cast_bf16_to_fp16=None, dtype=None):
        """Sums x over the group and returns the result: a new array/tensor, or
        `out` (out=x is in place). regime=None and cast_bf16_to_fp16=None use the
        configured ones with their FP threshold (qr_all_reduce); either given
        forces the call (qr_all_reduce_ex). Every rank must make the same calls.
        Host backend: synchronous. GPU: enqueued on torch's current stream.
        `dtype` reads 16-bit integer NumPy arrays as that type (e.g. bfloat16
        bits). Raises InvalidArgument before anything is sent for a wrong dtype,
        device, layout, alignment or size, and the group's failure as
        PeerFailed / Timeout."""
        c = self._c
        if c is None:
            self._handle("all_reduce")
        forced = DType.parse(dtype) if dtype is not None else None
        buf = describe(x, forced, "input")
        why = buf.problem(self._device, "input")
        if why:
            raise InvalidArgument(why)
        if out is None:
            out = empty_like(buf)
            obuf = describe(out, forced, "out")
        else:
            obuf = describe(out, forced, "out")
            why = obuf.problem(self._device, "out")
            if why:
                raise InvalidArgument(why)
            if obuf.dtype != buf.dtype or obuf.nbytes != buf.nbytes:
                raise InvalidArgument("out (%d bytes of %s) does not match the input (%d bytes of %s)"
                                      % (obuf.nbytes, obuf.dtype.name, buf.nbytes, buf.dtype.name))
        stream = None if self._device is None else _cuda_stream(self._device)
        if regime is None and cast_bf16_to_fp16 is None:
            st = self._lib.qr_all_reduce(c, buf.ptr, obuf.ptr, buf.count, buf.dtype, stream)
        else:
            r, cast = self._regime_cast(regime, cast_bf16_to_fp16)
            st = self._lib.qr_all_reduce_ex(c, buf.ptr, obuf.ptr, buf.count, buf.dtype, r, cast,
                                            stream)
        if st:
            _lib.check_status(st)
        return out

    def _fused_call(self, what, regime, cast_bf16_to_fp16, dtype):
        """(handle, stream, regime, cast, forced dtype) of a fused call: the
        configured regime and cast (QR_REGIME_CONFIGURED) when neither is given."""
        c = self._c
        if c is None:
            self._handle(what)
        stream = None if self._device is None else _cuda_stream(self._device)
        if regime is None and cast_bf16_to_fp16 is None:
            r, cast = _lib.QR_REGIME_CONFIGURED, 0
        else:
            r, cast = self._regime_cast(regime, cast_bf16_to_fp16)
        return c, stream, int(r), int(cast), DType.parse(dtype) if dtype is not None else None

    def all_reduce_residual_rmsnorm(self, x, residual, weight, eps, *, out=None,
                                    residual_out=None, regime=None, cast_bf16_to_fp16=None,
                                    dtype=None):
        """The fused layer boundary (docs/fused.md): s = all_reduce(x) (the same
        bits as all_reduce with these arguments), residual_out = s + residual
        (residual may be None), out = RMSNorm(residual_out) * weight over the
        last dimension (weight's length). Returns (out, residual_out), new
        arrays/tensors unless given: residual_out=residual updates the residual
        in place, out=x normalizes over x. Other overlaps raise InvalidArgument
        before anything is sent, as do a wrong dtype, device, layout or size.
        regime / cast_bf16_to_fp16 / dtype as in all_reduce."""
        from ._fused import run_residual_rmsnorm
        c, stream, r, cast, forced = self._fused_call("all_reduce_residual_rmsnorm", regime,
                                                      cast_bf16_to_fp16, dtype)
        return run_residual_rmsnorm(self._lib, c, self._device, x, residual, weight, eps, out,
                                    residual_out, r, cast, stream, forced)

    def all_reduce_residual_rmsnorm_fp8(self, x, residual, weight, eps, scale, *, out=None,
                                        residual_out=None, quant_out=None, regime=None,
                                        cast_bf16_to_fp16=None, dtype=None):
        """all_reduce_residual_rmsnorm, and the norm quantized to FP8 e4m3fn
        with a static per-tensor scale for the next GEMM (vLLM's
        fused_add_rms_norm_static_fp8_quant, FlashInfer's
        kARResidualRMSNorm(Out)FP8Quant): quant_out = e4m3fn(float(out) *
        (1 / scale)) per value, to nearest even, saturating at +-448, NaN ->
        0x7F. `scale`: one float32 value (an array or tensor of one element) on
        this communicator's device (host memory for the host backend), read
        when the call runs, so a captured CUDA graph reads its value at each
        replay. quant_out: one byte per value of x (float8_e4m3fn, or its
        codes as uint8 / int8), disjoint from everything else; new unless
        given (torch: float8_e4m3fn where torch has it, else uint8; NumPy:
        uint8). Returns (quant_out, out, residual_out); out and residual_out
        as in all_reduce_residual_rmsnorm, which also says what raises."""
        from ._fused import run_residual_rmsnorm_fp8
        c, stream, r, cast, forced = self._fused_call("all_reduce_residual_rmsnorm_fp8", regime,
                                                      cast_bf16_to_fp16, dtype)
        return run_residual_rmsnorm_fp8(self._lib, c, self._device, x, residual, weight, eps,
                                        scale, out, residual_out, quant_out, r, cast, stream,
                                        forced)

    def all_reduce_ptr(self, inp, out, count, dtype, *, regime=None, cast_bf16_to_fp16=None,
                       stream=None):
        """The pointer-level call (addresses as ints), for code that has its own buffers."""
        c = self._c
        if c is None:
            self._handle("all_reduce_ptr")
        d = DType.parse(dtype)
        if regime is None and cast_bf16_to_fp16 is None:
            st = self._lib.qr_all_reduce(c, inp, out, count, d, stream)
        else:
            r, cast = self._regime_cast(regime, cast_bf16_to_fp16)
            st = self._lib.qr_all_reduce_ex(c, inp, out, count, d, r, cast, stream)
        if st:
            _lib.check_status(st)

    def reduce_scatter(self, x, out=None, *, regime=None, cast_bf16_to_fp16=None, dtype=None):
        """Sums x (world_size * n values) over the group and returns this rank's
        n values [rank * n, (rank + 1) * n) of the sum: a new array/tensor
        (leading dimension divided by world_size where it divides, else 1-D),
        or `out`. The regime and cast default to the configured ones (no FP
        threshold: the regime is used as given); docs/collectives.md says
        what each computes. Raises as all_reduce does."""
        from . import _collectives
        return _collectives.reduce_scatter(self, x, out, regime=regime,
                                           cast_bf16_to_fp16=cast_bf16_to_fp16, dtype=dtype)

    def all_gather(self, x, out=None, *, regime=None, cast_bf16_to_fp16=None, dtype=None):
        """Gathers every rank's x (n values each) into world_size * n values,
        rank q's at [q * n, (q + 1) * n): a new array/tensor (leading dimension
        times world_size), or `out`. FP copies bits exactly; another regime
        (the configured one by default) is lossy within docs/collectives.md's
        bound. Raises as all_reduce does."""
        from . import _collectives
        return _collectives.all_gather(self, x, out, regime=regime,
                                       cast_bf16_to_fp16=cast_bf16_to_fp16, dtype=dtype)

    def check(self):
        """Raises the group's failure (PeerFailed / Timeout, sticky); never blocks."""
        _lib.check_status(self._lib.qr_check(self._handle("check")))

    def abort(self, reason="aborted"):
        """Fails the whole group now: every peer's pending and later calls raise
        PeerFailed naming this rank and `reason`. close() is still needed."""
        _lib.check_status(self._lib.qr_abort(self._handle("abort"), str(reason).encode()))

    def close(self):
        """Leaves the group and frees everything (qr_leave). Idempotent."""
        c, self._c = self._c, None
        if c is None:
            return
        _unregister(self._name, self)
        _lib.check_status(self._lib.qr_leave(c))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and self._c is not None:
            try:
                self.abort("%s: %s" % (exc_type.__name__, exc))
            except Exception:  # the original exception matters more
                pass
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_c", None) is not None and not sys.is_finalizing():
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self):
        where = "host" if self._device is None else "cuda:%d" % self._device
        return "<quickreduce.Communicator %s rank %d/%d on %s%s>" % (
            self._group, self._rank, self._world_size, where, " closed" if self.closed else "")

    # --- torch.distributed ---
    @classmethod
    def from_process_group(cls, pg=None, device=None, *, group=None, **kwargs):
        """A communicator for the ranks of torch.distributed group `pg` (None:
        the default group): rank and world size from pg, and a group name that
        pg's rank 0 makes up and broadcasts (or `group`, the same on every
        rank). pg is also registered as the torch ops' fallback for this group.
        Use a CPU (gloo) group or any group whose collectives work here."""
        import torch.distributed as dist
        rank = dist.get_rank(pg)
        world_size = dist.get_world_size(pg)
        if group is None:
            import uuid
            box = ["pg-" + uuid.uuid4().hex[:20] if rank == 0 else None]
            if pg is None:
                src = 0
            else:
                get_global = getattr(dist, "get_global_rank", None) or \
                    dist.distributed_c10d._get_global_rank
                src = get_global(pg, 0)
            dist.broadcast_object_list(box, src=src, group=pg)
            group = box[0]
        comm = cls(group, rank, world_size, device, **kwargs)
        register_fallback(group, pg if pg is not None else dist.group.WORLD)
        return comm
