"""The backend object vLLM and SGLang dispatch to in their `qr_comm` slot:
`disabled`, `should_quick_allreduce(t)`, `quick_all_reduce(t, *, out=None)`,
`close()`. Built from the stack's CPU (gloo) group and device; it never raises
for an unsupported setup, it disables itself and logs why."""

import logging
import uuid

logger = logging.getLogger("quickreduce")

WORLD_SIZES = (2, 4, 8)


class QuickReduceBackend:
    def __init__(self, cpu_group, device, label="quickreduce"):
        self.disabled = True
        self.comm = None
        try:
            import torch.distributed as dist
            rank = dist.get_rank(cpu_group)
            world_size = dist.get_world_size(cpu_group)
            if world_size not in WORLD_SIZES:
                logger.info("%s: world size %d is not 2, 4 or 8; disabled", label, world_size)
                return
            # A fresh name per group, made up by its rank 0 (broadcast, not
            # all_gather_object: that fails under inference mode with gloo).
            box = [label + "-" + uuid.uuid4().hex[:16] if rank == 0 else None]
            get_global = getattr(dist, "get_global_rank", None) or \
                dist.distributed_c10d._get_global_rank
            dist.broadcast_object_list(box, src=get_global(cpu_group, 0), group=cpu_group)
            from ..communicator import Communicator
            self.comm = Communicator(box[0], rank, world_size, device)
            self.disabled = False
            logger.info("%s: quickreduce %s on %r (regime %s)", label, self.comm.group, device,
                        self.comm.config["regime"])
        except Exception as e:  # never take the engine down: it falls back to its own paths
            logger.warning("%s: quickreduce disabled: %s: %s", label, type(e).__name__, e)
            self.comm = None
            self.disabled = True

    def should_quick_allreduce(self, inp):
        return not self.disabled and self.comm.should_all_reduce(inp)

    def quick_all_reduce(self, inp, *, out=None):
        return self.comm.all_reduce(inp, out=out)

    def close(self):
        if self.comm is not None:
            self.comm.close()
            self.comm = None
        self.disabled = True

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def wrap_init(cls, after):
    """Makes cls.__init__ run after(self) once the original returned
    (idempotent; after's exceptions are logged, never raised: the engine must
    come up with its own all-reduce paths whatever happens here)."""
    original = cls.__init__
    if getattr(original, "_quickreduce", False):
        return

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        try:
            after(self)
        except Exception as e:
            logger.warning("quickreduce: not installed into %s: %s", type(self).__name__, e)

    __init__._quickreduce = True
    __init__.__wrapped__ = original
    cls.__init__ = __init__
