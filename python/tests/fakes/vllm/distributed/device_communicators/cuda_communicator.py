"""Follows vllm-project/vllm vllm/distributed/device_communicators/
cuda_communicator.py (the newest stored copy, upstream sha256 102d95c6...,
index id 71111748962; the same shape at commit 089eca13): the constructor's
arguments, the TP gate on unique_name, use_custom_allreduce from
_ENABLE_CUSTOM_ALL_REDUCE, QuickAllReduce built only on ROCm, the
backend-selection line at the end of __init__, all_reduce's order (NCCL
symmetric memory, quick reduce, FlashInfer PCIe-IPC, FlashInfer, AITER custom,
custom, torch symmetric memory, pynccl, torch.distributed), destroy (which
does not touch qr_comm), suspend/resume and checkpoint_prepare/restore (which
cover pynccl, FlashInfer and all2all only), all_gather / reduce_scatter
(NCCL symmetric memory, else pynccl, else the base class). Backends this machine lacks
(pynccl, FlashInfer, symmetric memory, AITER) are None, as they are there
without them. `taken_by` records which backend served the last call."""
import torch

from vllm.logger import init_logger

from .base_device_communicator import DeviceCommunicatorBase

logger = init_logger(__name__)
IS_ROCM = False  # current_platform.is_rocm(): vLLM builds its own quick reduce


class CudaCommunicator(DeviceCommunicatorBase):
    def __init__(self, cpu_group, device=None, device_group=None, unique_name="",
                 global_ranks=None, global_world_size=None, tcp_store_group=None,
                 use_all2all=False):
        super().__init__(cpu_group, device, device_group, unique_name, global_ranks,
                         global_world_size, use_all2all=use_all2all)
        if unique_name.split(":")[0] != "tp":
            use_custom_allreduce = False
        else:
            from vllm.distributed.parallel_state import _ENABLE_CUSTOM_ALL_REDUCE
            use_custom_allreduce = _ENABLE_CUSTOM_ALL_REDUCE
        self.use_custom_allreduce = use_custom_allreduce
        from .custom_all_reduce import CustomAllreduce
        self.pynccl_comm = None
        self.ca_comm = None
        self.qr_comm = None
        self.symm_mem_comm = None
        self.fi_ar_comm = None
        self.fi_pcie_ipc_ar_comm = None
        self.aiter_ar_comm = None
        self.use_aiter_allreduce = False
        if use_custom_allreduce and self.world_size > 1:
            self.ca_comm = CustomAllreduce(group=self.cpu_group, device=self.device,
                                           symm_mem_enabled=False)
        if use_custom_allreduce and self.world_size > 1 and IS_ROCM:
            from .quick_all_reduce import QuickAllReduce
            self.qr_comm = QuickAllReduce(group=self.cpu_group, device=self.device)
        if self.world_size > 1:
            self._log_all_reduce_backend_selection()
        self.taken_by = None
        self.suspended = 0

    def _log_all_reduce_backend_selection(self):
        potential = ["FLASHINFER_PCIE_IPC", "FLASHINFER", "NCCL_SYMM_MEM", "QUICK_REDUCE",
                     "AITER_CUSTOM", "CUSTOM", "SYMM_MEM", "PYNCCL"]
        enabled = []
        if self.qr_comm is not None and not self.qr_comm.disabled:
            enabled.append("QUICK_REDUCE")
        if self.ca_comm is not None and not self.ca_comm.disabled:
            enabled.append("CUSTOM")
        if self.pynccl_comm is not None and not self.pynccl_comm.disabled:
            enabled.append("PYNCCL")
        logger.info_once(
            "Using %s all-reduce backends (in dispatch order) for group "
            "'%s' out of potential backends: %s.",
            "[" + ", ".join(f"'{b}'" for b in enabled) + "]",
            self.unique_name or "<unnamed>",
            "[" + ", ".join(f"'{b}'" for b in potential) + "]",
            scope="global")

    def all_reduce(self, input_):
        qr_comm = self.qr_comm
        if qr_comm is not None and not qr_comm.disabled and \
                qr_comm.should_quick_allreduce(input_):
            out = qr_comm.quick_all_reduce(input_)
            assert out is not None
            self.taken_by = "qr"
            return out
        ca_comm = self.ca_comm
        if ca_comm is not None and not ca_comm.disabled and ca_comm.should_custom_ar(input_):
            out = ca_comm.custom_all_reduce(input_)
            assert out is not None
            self.taken_by = "ca"
            return out
        out = input_.clone()
        torch.distributed.all_reduce(out, group=self.device_group)
        self.taken_by = "torch"
        return out

    # all_gather: dim 0 goes to NCCL symmetric memory when that is on, else
    # pynccl, else (no pynccl, as here) the base class. reduce_scatter: the
    # real one asserts pynccl and runs it on input_.movedim(0, dim)
    # .contiguous(); without pynccl the fake runs the base class's, which
    # computes the same values.
    def all_gather(self, input_, dim=-1):
        return super().all_gather(input_, dim)

    def reduce_scatter(self, input_, dim=-1):
        return super().reduce_scatter(input_, dim)

    def destroy(self):
        if self.pynccl_comm is not None:
            self.pynccl_comm = None
        if self.ca_comm is not None:
            self.ca_comm = None

    def suspend(self):
        self.suspended += 1

    def resume(self):
        self.suspended -= 1

    def checkpoint_prepare(self):
        pass

    def checkpoint_restore(self):
        pass
