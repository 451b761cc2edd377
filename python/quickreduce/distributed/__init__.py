"""`import quickreduce.distributed` registers the torch.distributed backend
"quickreduce" (docs/distributed.md):

    import quickreduce.distributed
    torch.distributed.init_process_group(backend="quickreduce", ...)

fp16/bf16 SUM all_reduce, reduce_scatter_tensor and all_gather_into_tensor run
through quickreduce (regime from QR_QUANTIZATION); every other op and dtype
goes to a gloo (CPU) or NCCL (CUDA) group made beside it. Ranks with the same
QR_NODE_ID (else host name) form one quickreduce group; across nodes
all_reduce is hierarchical."""

import inspect

import torch.distributed as dist

from ._process_group import QuickReduceProcessGroup, create_process_group
from ._topology import Layout, layout_of, node_id

__all__ = ["BACKEND", "QuickReduceProcessGroup", "Layout", "layout_of", "node_id", "register"]

BACKEND = "quickreduce"


def register():
    """Registers the backend once (importing this module does)."""
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    kwargs = {}
    # torch >= 2.1 names the devices a plugin serves; 1.13 has no such argument.
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu", "cuda"]
    dist.Backend.register_backend(BACKEND, create_process_group, **kwargs)


register()
