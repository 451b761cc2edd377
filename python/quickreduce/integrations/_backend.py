"""The backend object vLLM and SGLang dispatch to in their `qr_comm` slot,
with the API of their QuickAllReduce: `disabled`, `should_quick_allreduce(t)`,
`quick_all_reduce(t, *, out=None)`, `close()`; and the lifecycle hooks
`suspend()` / `resume()` (leave the group and join it again).

- Rank and world size come from the stack's own communicator (rank_in_group,
  world_size), and the group's name is agreed through the stack's CPU group
  (a StatelessProcessGroup's broadcast_obj, or torch.distributed with the
  global rank of the group's first member as the source), so groups
  torch.distributed does not know work too.
- should_quick_allreduce is a pure function of the tensor: dtype, device,
  layout, alignment and size against limits fixed at join (every rank gives
  the same answer for the same tensor, also after a peer died; the call then
  raises). Like vLLM's is_weak_contiguous it accepts non-contiguous tensors
  whose elements fill one dense range (a transposed matrix), reduced as that
  range.
- batch_invariant: FP only and no lower size limit, so a row's sum does not
  depend on the batch it came in (one-shot and two-shot FP agree bit for bit).
Construction never raises for an unsupported setup: it disables itself and
logs why.
"""

import logging
import uuid

from .._enums import DType, Regime

logger = logging.getLogger("quickreduce")

WORLD_SIZES = (2, 4, 8)
_UNIT = 16  # bytes: the kernels' unit of size and alignment


def _storage_nbytes(t):
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.nbytes()


def dense_range(t):
    """True when t's elements fill one dense byte range starting at
    t.data_ptr() (contiguous, or a permutation of a contiguous layout). vLLM's
    is_weak_contiguous also asks that the range end where the storage ends;
    that part says nothing about the layout and is not needed here."""
    if t.is_contiguous():
        return True
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape) if n != 1)
    expect = 1
    for stride, size in dims:
        if stride != expect:
            return False
        expect *= size
    return expect == t.numel() and \
        _storage_nbytes(t) >= (t.storage_offset() + t.numel()) * t.element_size()


def _flat(t):
    return t.as_strided((t.numel(),), (1,))


def _agree_on_name(cpu_group, rank, src, label):
    """A fresh group name made up by the group's rank 0, the same on every rank."""
    mine = label + "-" + uuid.uuid4().hex[:16] if rank == 0 else None
    if hasattr(cpu_group, "broadcast_obj"):  # vLLM's StatelessProcessGroup
        return cpu_group.broadcast_obj(mine, src=0)
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d
    world = getattr(c10d, "_world", None)  # torch >= 2.0; 1.13 has _pg_map
    if (world.pg_map if world is not None else c10d._pg_map).get(cpu_group) is None:
        return _broadcast_on_unregistered(cpu_group, mine)
    if src is None:
        get_global = getattr(dist, "get_global_rank", None) or \
            dist.distributed_c10d._get_global_rank
        src = get_global(cpu_group, 0)
    # broadcast_object_list, not all_gather_object: that fails under
    # inference mode with gloo.
    box = [mine]
    dist.broadcast_object_list(box, src=src, group=cpu_group)
    return box[0]


def _broadcast_on_unregistered(pg, mine, size=128):
    """The name over a ProcessGroup torch.distributed has no record of (vLLM's
    stateless groups): its own broadcast, group rank 0 as the root."""
    import torch
    import torch.distributed as dist
    buf = torch.zeros(size, dtype=torch.uint8)
    if mine is not None:
        b = mine.encode()[:size]
        buf[:len(b)] = torch.tensor(list(b), dtype=torch.uint8)
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    opts.rootTensor = 0
    pg.broadcast([buf], opts).wait()
    return bytes(buf.tolist()).rstrip(b"\0").decode()


class QuickReduceBackend:
    def __init__(self, cpu_group, device, label="quickreduce", *, rank=None, world_size=None,
                 src=None, batch_invariant=False, log=None):
        """rank, world_size: this process's place in the stack's group (the
        stack's rank_in_group and world_size; None: asked of torch.distributed).
        src: the global rank of the group's rank 0, for torch.distributed's
        broadcast. log: the stack's logger."""
        self.disabled = True
        self.comm = None
        self.log = log or logger
        self.label = label
        self.batch_invariant = batch_invariant
        self._device = device
        self._resumes = 0
        self._limits = {}
        try:
            if rank is None or world_size is None:
                import torch.distributed as dist
                rank = dist.get_rank(cpu_group)
                world_size = dist.get_world_size(cpu_group)
            self.rank, self.world_size = rank, world_size
            if world_size not in WORLD_SIZES:
                self.log.info("%s: world size %d is not 2, 4 or 8; quickreduce disabled", label,
                              world_size)
                return
            self.name = _agree_on_name(cpu_group, rank, src, label)
            self._join(self.name)
            self.log.info("%s: quickreduce %s on %r (regime %s%s)", label, self.name, device,
                          self.comm.config["regime"],
                          ", FP only for batch invariance" if batch_invariant else "")
        except Exception as e:  # never take the engine down: it falls back to its own paths
            self.log.warning("%s: quickreduce disabled: %s: %s", label, type(e).__name__, e)
            self._drop()

    # --- joining and the limits fixed at join ---
    def _join(self, name):
        from ..communicator import Communicator
        self.comm = Communicator(name, self.rank, self.world_size, self._device)
        self._limits = {d: self._eligible_range(d) for d in (DType.FLOAT16, DType.BFLOAT16)}
        self.disabled = False

    def _eligible(self, nbytes, dtype):
        c = self.comm
        if self.batch_invariant:
            return c._lib.qr_should_all_reduce_ex(c._c, nbytes, int(dtype), int(Regime.FP),
                                                  int(c._default_cast)) == 1
        return c._lib.qr_should_all_reduce(c._c, nbytes, int(dtype)) == 1

    def _eligible_range(self, dtype):
        """(lo, hi) bytes such that the library's rule takes exactly the
        16-byte multiples in [lo, hi], or None. Found once, at join, while the
        group is healthy: the rule is an interval in the size (a floor from
        the regime's table and a ceiling, QR_MAX_SIZE_BYTES_MB)."""
        hi = self.comm.config["max_size_bytes"] // _UNIT * _UNIT
        if hi < _UNIT or not self._eligible(hi, dtype):
            return None
        if self.batch_invariant:
            return (_UNIT, hi)  # no floor: the answer must not change with the size
        lo_units, hi_units = 1, hi // _UNIT  # smallest eligible multiple lies in here
        while lo_units < hi_units:
            mid = (lo_units + hi_units) // 2
            if self._eligible(mid * _UNIT, dtype):
                hi_units = mid
            else:
                lo_units = mid + 1
        return (lo_units * _UNIT, hi)

    # --- the QuickAllReduce API ---
    def should_quick_allreduce(self, inp):
        if self.disabled:
            return False
        d = {"torch.float16": DType.FLOAT16, "torch.bfloat16": DType.BFLOAT16}.get(str(inp.dtype))
        limits = self._limits.get(d)
        if limits is None:
            return False
        nbytes = inp.numel() * inp.element_size()
        if not limits[0] <= nbytes <= limits[1] or nbytes % _UNIT or inp.data_ptr() % _UNIT:
            return False
        where = inp.get_device() if inp.is_cuda else (None if inp.device.type == "cpu" else -1)
        return where == self.comm.device and dense_range(inp)

    def quick_all_reduce(self, inp, *, out=None):
        """Out-of-place sum over the group (out=None: a new tensor like inp).
        Raises the group's failure (PeerFailed, Timeout) and InvalidArgument."""
        if self.comm is None:
            from ..errors import InvalidArgument
            raise InvalidArgument("%s: quickreduce is %s" % (
                self.label, "suspended" if getattr(self, "name", None) else "closed"))
        import torch
        if out is None:
            out = torch.empty_like(inp)  # keeps a dense layout's strides
        x, y = inp, out
        if not (inp.is_contiguous() and out.is_contiguous()):
            if not (dense_range(inp) and dense_range(out)) or inp.stride() != out.stride():
                from ..errors import InvalidArgument
                raise InvalidArgument("%s: input and out must fill one dense range each, with "
                                      "the same strides" % self.label)
            x, y = _flat(inp), _flat(out)
        regime = "FP" if self.batch_invariant else None
        self.comm.all_reduce(x, out=y, regime=regime)
        return out

    # --- lifecycle ---
    def suspend(self):
        """Leaves the group (frees its shared memory and IPC mappings), for a
        stack's sleep mode or a CUDA checkpoint; resume() joins again. Every
        rank must call both, as the stack's collective hooks do."""
        if self.comm is not None:
            self.log.info("%s: quickreduce leaves %s until resume", self.label, self.comm.group)
            self.comm.close()
            self.comm = None
        self.disabled = True

    def resume(self):
        """Joins a fresh group of the same ranks (the name's suffix counts
        resumes, so every rank derives the same one)."""
        if self.comm is not None or not getattr(self, "name", None):
            return
        self._resumes += 1
        try:
            self._join("%s.%d" % (self.name, self._resumes))
        except Exception as e:
            self.log.warning("%s: quickreduce did not re-join after resume: %s: %s", self.label,
                             type(e).__name__, e)
            self._drop()

    def _drop(self):
        if self.comm is not None:
            try:
                self.comm.close()
            except Exception:
                pass
        self.comm = None
        self.disabled = True

    def close(self):
        c, self.comm = self.comm, None
        self.disabled = True
        self.name = None  # closed for good: resume() does nothing
        if c is not None:
            c.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def wrap_method(cls, name, after, log=None):
    """Makes cls.<name> run after(self, result, args, kwargs) once the
    original returned (idempotent; after's exceptions are logged, never
    raised: the engine must come up with its own all-reduce paths whatever
    happens here). Returns False when cls has no such method."""
    original = cls.__dict__.get(name) or getattr(cls, name, None)
    if original is None:
        return False
    if getattr(original, "_quickreduce", False):
        return True

    def wrapper(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            after(self, result, args, kwargs)
        except Exception as e:
            (log or logger).warning("quickreduce: %s.%s hook failed: %s: %s",
                                    type(self).__name__, name, type(e).__name__, e)
        return result

    wrapper._quickreduce = True
    wrapper.__wrapped__ = original
    wrapper.__name__ = name
    setattr(cls, name, wrapper)
    return True


def unwrap(cls, name):
    """Undoes wrap_method (tests)."""
    m = cls.__dict__.get(name)
    if getattr(m, "_quickreduce", False):
        setattr(cls, name, m.__wrapped__)


def backend_of(obj):
    """obj's qr_comm when it is quickreduce's, else None."""
    b = getattr(obj, "qr_comm", None)
    return b if isinstance(b, QuickReduceBackend) else None
