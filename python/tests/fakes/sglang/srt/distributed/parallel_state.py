"""Follows sgl-project/sglang python/sglang/srt/distributed/parallel_state.py
@0005973a, GroupCoordinator: the constructor's arguments, unique_name from
group_name ("tp" -> "tp:0"), the groups made per rank list (device group with
the given backend, a gloo cpu group), rank_in_group, ca_comm built when
use_custom_allreduce, qr_comm only on HIP, graph_capture (custom all-reduce's
capture context only), all_reduce's eager order (in-place pynccl symmetric
memory when custom all-reduce declines, FlashInfer, then
_resolve_outplace_all_reduce_method: ca, qr, pymscclpp, torch symmetric
memory, pynccl, else in place), reduce_scatter_tensor /
all_gather_into_tensor / all_gather(input_, dim) down to the bodies
_reduce_scatter_tensor / _all_gather_into_tensor (pynccl absent:
torch.distributed), and destroy (drops ca_comm, never qr_comm).
One deliberate difference: the real all_reduce sends CPU tensors to its shm /
torch.distributed branch first; the fake leaves that branch out so CPU
tensors take the accelerator's order, the host backend standing in for the
GPU. Absent backends (pynccl, pymscclpp, FlashInfer, symmetric memory) are
None as on a machine without them; `taken_by` names the last call's."""
import contextlib

import torch
import torch.distributed as dist

CA_TAKES = False  # the fake custom all-reduce takes everything when True
SYMM_MEM = False  # is_symmetric_memory_enabled()
_group_name_counter = {}


def _get_unique_name(name):
    n = _group_name_counter.get(name, 0)
    _group_name_counter[name] = n + 1
    return "%s:%d" % (name, n)


class _CustomAllreduce:
    def __init__(self, group, device):
        self.group = group
        self.disabled = not CA_TAKES

    def should_custom_ar(self, inp):
        return not self.disabled

    def custom_all_reduce(self, inp):
        out = inp.clone()
        dist.all_reduce(out, group=self.group)
        return out

    @contextlib.contextmanager
    def capture(self):
        yield


def _gloo_reduce_scatter(output, input, group, rank):
    # torch.distributed.reduce_scatter_tensor where the group has it; gloo
    # before torch 2 has none: a float32 all-reduce of a copy, this rank's
    # slice (exact for the small integers the tests reduce).
    fn = getattr(dist, "reduce_scatter_tensor", None)
    if fn is not None:
        try:
            fn(output, input, group=group)
            return
        except RuntimeError:
            pass
    tmp = input.float().contiguous()
    dist.all_reduce(tmp, group=group)
    m = output.numel()
    output.view(-1).copy_(tmp.view(-1)[rank * m:(rank + 1) * m])


class GroupCoordinator:
    def __init__(self, group_ranks, local_rank, torch_distributed_backend, use_pynccl,
                 use_pymscclpp, use_custom_allreduce, use_torch_symm_mem_all_reduce,
                 use_hpu_communicator, use_xpu_communicator, use_npu_communicator,
                 use_message_queue_broadcaster=False, group_name=None, gloo_timeout=None,
                 recovered_rank=False, rank_offset=0, max_world_size=None):
        group_name = group_name or "anonymous"
        self.unique_name = _get_unique_name(group_name)
        self.rank = dist.get_rank()
        self.local_rank = local_rank
        self.device_group = None
        self.cpu_group = None
        self._fi_workspace_hint = None
        self.device = torch.device("cpu")
        for ranks in group_ranks:
            device_group = dist.new_group(ranks, backend=torch_distributed_backend)
            cpu_group = dist.new_group(ranks, backend="gloo")
            if self.rank in ranks:
                self.ranks = ranks
                self.world_size = len(ranks)
                self.rank_in_group = ranks.index(self.rank)
                self.device_group = device_group
                self.cpu_group = cpu_group
        assert self.cpu_group is not None
        self.use_pynccl = use_pynccl
        self.use_pymscclpp = use_pymscclpp
        self.use_custom_allreduce = use_custom_allreduce
        self.use_torch_symm_mem_all_reduce = use_torch_symm_mem_all_reduce
        self.is_symmetric_memory_enabled = lambda: SYMM_MEM
        self.pynccl_comm = None
        self.pymscclpp_comm = None
        self.ca_comm = None
        self.qr_comm = None
        if use_custom_allreduce and self.world_size > 1:
            self.ca_comm = _CustomAllreduce(group=self.cpu_group, device=self.device)
        self.torch_symm_mem_comm = None
        self.mq_broadcaster = None
        self.taken_by = None

    @contextlib.contextmanager
    def graph_capture(self, graph_capture_context=None, stream=None):
        ca_comm = self.ca_comm
        maybe_ca_context = contextlib.nullcontext() if ca_comm is None else ca_comm.capture()
        with maybe_ca_context:
            yield graph_capture_context

    def all_reduce(self, input_):
        if self.world_size == 1:
            return input_
        should_use_custom_allreduce = (
            self.ca_comm is not None and not self.ca_comm.disabled
            and self.ca_comm.should_custom_ar(input_))
        if self.pynccl_comm is not None and self.is_symmetric_memory_enabled() and \
                not should_use_custom_allreduce:
            raise AssertionError("the fake has no pynccl")
        method = self._resolve_outplace_all_reduce_method(input_)
        if method is not None:
            return self._all_reduce_out_place(input_, method)
        self.taken_by = "inplace"
        dist.all_reduce(input_, group=self.device_group)
        return input_

    def _resolve_outplace_all_reduce_method(self, input_):
        if self.ca_comm is not None and not self.ca_comm.disabled and \
                self.ca_comm.should_custom_ar(input_):
            return "ca"
        if self.qr_comm is not None and not self.qr_comm.disabled and \
                self.qr_comm.should_quick_allreduce(input_):
            return "qr"
        return None

    def _all_reduce_out_place(self, input_, method):
        self.taken_by = method
        if method == "ca":
            return self.ca_comm.custom_all_reduce(input_)
        assert not self.qr_comm.disabled
        return self.qr_comm.quick_all_reduce(input_)

    # reduce_scatter_tensor / all_gather_into_tensor: the real ones send CPU
    # and NPU tensors straight to the underscore bodies, and other devices
    # through the custom ops reg_reduce_scatter_tensor /
    # reg_all_gather_into_tensor, which look the group up by unique_name and
    # call the same bodies (the deterministic-inference and AITER branches are
    # left out: off on a machine without them).
    def reduce_scatter_tensor(self, output, input):
        self._reduce_scatter_tensor(output, input)

    def _reduce_scatter_tensor(self, output, input):
        self.taken_by_rsag = "sglang"
        _gloo_reduce_scatter(output, input, self.device_group, self.rank_in_group)
        return output

    def all_gather_into_tensor(self, output, input):
        self._all_gather_into_tensor(output, input)

    def _all_gather_into_tensor(self, output, input):
        self.taken_by_rsag = "sglang"
        dist.all_gather(list(output.view(-1).chunk(self.world_size)), input.contiguous().view(-1),
                        group=self.device_group)

    def all_gather(self, input_, dim=-1):
        # The real one's accelerator branch: concat-style along dim 0, then
        # moved to `dim`.
        if self.world_size == 1:
            return input_
        if dim < 0:
            dim += input_.dim()
        input_size = input_.size()
        output_tensor = torch.empty((input_size[0] * self.world_size,) + input_size[1:],
                                    dtype=input_.dtype, device=input_.device)
        self.all_gather_into_tensor(output_tensor, input_)
        output_tensor = output_tensor.reshape((self.world_size,) + input_size)
        output_tensor = output_tensor.movedim(0, dim)
        return output_tensor.reshape(input_size[:dim] + (self.world_size * input_size[dim],) +
                                     input_size[dim + 1:])

    def destroy(self):
        if self.device_group is not None:
            dist.destroy_process_group(self.device_group)
            self.device_group = None
        if self.cpu_group is not None:
            dist.destroy_process_group(self.cpu_group)
            self.cpu_group = None
        if self.pynccl_comm is not None:
            self.pynccl_comm = None
        if self.ca_comm is not None:
            self.ca_comm = None
        if self.mq_broadcaster is not None:
            self.mq_broadcaster = None
