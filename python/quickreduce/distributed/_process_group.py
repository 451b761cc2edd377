"""QuickReduceProcessGroup: a torch.distributed ProcessGroup written in Python
(a subclass of dist.ProcessGroup: torch 1.13 calls its methods from Python,
torch 2.x also through the PyProcessGroup trampoline) that runs fp16/bf16 SUM
all_reduce, reduce_scatter_tensor and all_gather_into_tensor through
quickreduce and delegates everything else to a gloo group (CPU tensors) or an
NCCL group (CUDA tensors) made beside it on the same store.

Across nodes (docs/distributed.md, _hierarchical.py) the three are
hierarchical: quickreduce inside the node, the delegate group of the ranks of
equal local rank across nodes."""

import uuid

import torch
import torch.distributed as dist

from .. import _collectives
from ..communicator import Communicator
from ..errors import InvalidArgument
from . import _hierarchical
from ._topology import exchange_layout

_HALF = (torch.float16, torch.bfloat16)
# Ops that never run through quickreduce: forwarded as they are.
_DELEGATED = ("broadcast", "allgather", "allgather_coalesced", "allreduce_coalesced", "reduce",
              "gather", "scatter", "reduce_scatter", "alltoall", "alltoall_base", "send", "recv",
              "recv_anysource", "monitored_barrier")


def _done(result):
    fut = torch.futures.Future()
    fut.set_result(result)
    # A finished Work (torch 1.13 and 2.x): quickreduce's host calls are
    # synchronous, its GPU calls ordered on the current stream as NCCL's are.
    return torch._C._distributed_c10d._create_work_from_future(fut)


def _first_tensor(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, (list, tuple)):
            t = _first_tensor(a)
            if t is not None:
                return t
    return None


def _is_sum(op):
    try:
        return op == dist.ReduceOp.SUM
    except Exception:  # an op type this torch cannot compare (premul-sum, ...)
        return False


def _gloo(store, rank, size, timeout):
    return dist.ProcessGroupGloo(store, rank, size, timeout)


class QuickReduceProcessGroup(dist.ProcessGroup):
    """The process group init_process_group(backend="quickreduce") makes."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._store = store
        self._timeout = timeout
        self.layout = exchange_layout(store, rank, size)
        lay = self.layout
        if lay.local_size not in (1, 2, 4, 8):
            raise InvalidArgument(
                "quickreduce: %d ranks per node; quickreduce groups have 2, 4 or 8 (1: everything "
                "through gloo/NCCL)" % lay.local_size)
        if rank == 0:
            store.set("qr/group", "qd-" + uuid.uuid4().hex[:16])
        self._group = store.get("qr/group").decode()
        self._gloo = _gloo(dist.PrefixStore("qr/gloo", store), rank, size, timeout)
        self._nccl = None
        if torch.cuda.is_available() and dist.is_nccl_available():
            self._nccl = dist.ProcessGroupNCCL(dist.PrefixStore("qr/nccl", store), rank, size)
        # The cross-node legs: the ranks of this local rank, one per node.
        self._cross_gloo = self._cross_nccl = None
        if lay.num_nodes > 1:
            cross = dist.PrefixStore("qr/cross%d" % lay.local_rank, store)
            self._cross_gloo = _gloo(dist.PrefixStore("gloo", cross), lay.node, lay.num_nodes,
                                     timeout)
            if self._nccl is not None:
                self._cross_nccl = dist.ProcessGroupNCCL(dist.PrefixStore("nccl", cross), lay.node,
                                                         lay.num_nodes)
        self._comms = {}

    # --- torch.distributed's view of the group ---
    def getBackendName(self):
        return "quickreduce"

    def __repr__(self):
        return "<QuickReduceProcessGroup rank %d/%d %r>" % (self.rank(), self.size(), self.layout)

    # --- the pieces ---
    def _delegate(self, tensor):
        if tensor is not None and tensor.is_cuda and self._nccl is not None:
            return self._nccl
        return self._gloo

    def cross_group(self, tensor):
        """The cross-node group of this rank's local rank for tensors like `tensor`."""
        if tensor.is_cuda and self._cross_nccl is not None:
            return self._cross_nccl
        return self._cross_gloo

    def communicator(self, tensor):
        """This node's quickreduce Communicator for tensors like `tensor` (one
        for CPU tensors, one per CUDA device), joined on first use (every rank
        of the node makes the same calls, so they join together); None when
        the node has one rank."""
        if self.layout.local_size == 1:
            return None
        key = ("cuda", tensor.get_device()) if tensor.is_cuda else ("cpu", None)
        comm = self._comms.get(key)
        if comm is None:
            name = "%s-n%d-%s" % (self._group, self.layout.node, key[0])
            comm = Communicator(name, self.layout.local_rank, self.layout.local_size,
                                tensor.device if tensor.is_cuda else None,
                                name="%s-r%d" % (name, self.rank()))
            self._comms[key] = comm
        return comm

    def close(self):
        for comm in self._comms.values():
            comm.close()
        self._comms.clear()

    # --- the collectives quickreduce runs ---
    def _try_all_reduce(self, t):
        if t.dtype not in _HALF or not t.is_contiguous():
            return False
        comm = self.communicator(t)
        if comm is None:
            return False
        if self.layout.num_nodes == 1:
            if not comm.should_all_reduce(t):
                return False
            comm.all_reduce(t, out=t)
            return True
        return _hierarchical.all_reduce(self, comm, t)

    def allreduce(self, tensors, opts=None):
        if opts is None:
            opts = dist.AllreduceOptions()
        if len(tensors) == 1 and _is_sum(opts.reduceOp) and self._try_all_reduce(tensors[0]):
            return _done(tensors)
        return self._delegate(_first_tensor(tensors)).allreduce(tensors, opts)

    def _collective_comm(self, t):
        """The node's communicator when quickreduce takes part in a
        reduce-scatter or all-gather of t (fp16/bf16, a node of 2+ ranks; CPU
        or CUDA tensors)."""
        if t.dtype not in _HALF:
            return None
        return self.communicator(t)

    def _reduce_scatter_base(self, output, input, opts=None):
        if opts is None:
            opts = dist.ReduceScatterOptions()
        comm = self._collective_comm(input) if _is_sum(opts.reduceOp) else None
        if comm is not None and output.is_contiguous() and output.dtype == input.dtype:
            if self.layout.num_nodes == 1:
                if _collectives.should_run(comm, input, False):
                    comm.reduce_scatter(input, out=output)
                    return _done([output])
            elif _hierarchical.reduce_scatter(self, comm, output, input, opts):
                return _done([output])
        return _hierarchical.reduce_scatter_via(self._delegate(input), output, input, opts,
                                                self.rank())

    def _allgather_base(self, output, input, opts=None):
        comm = self._collective_comm(input)
        if comm is not None and output.is_contiguous() and output.dtype == input.dtype:
            if self.layout.num_nodes == 1:
                if _collectives.should_run(comm, input, True):
                    comm.all_gather(input, out=output)
                    return _done([output])
            elif _hierarchical.all_gather(self, comm, output, input, opts):
                return _done([output])
        return _hierarchical.all_gather_via(self._delegate(input), output, input, opts,
                                            self.size())

    def barrier(self, opts=None):
        return self._gloo.barrier() if opts is None else self._gloo.barrier(opts)


def _forward(name):
    def method(self, *args, **kwargs):
        # torch 2.x passes some options by keyword (monitored_barrier's).
        return getattr(self._delegate(_first_tensor(args)), name)(*args, **kwargs)
    method.__name__ = name
    method.__doc__ = "Delegated to gloo (CPU tensors) or NCCL (CUDA tensors)."
    return method


for _name in _DELEGATED:
    setattr(QuickReduceProcessGroup, _name, _forward(_name))


def create_process_group(store, rank, size, timeout):
    """torch.distributed's creator function of the "quickreduce" backend."""
    return QuickReduceProcessGroup(store, rank, size, timeout)
