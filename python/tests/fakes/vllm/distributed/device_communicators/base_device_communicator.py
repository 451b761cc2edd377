"""Follows vllm-project/vllm vllm/distributed/device_communicators/
base_device_communicator.py (DeviceCommunicatorBase.__init__, stored copy
index id 59226665544): rank, world size and ranks from torch.distributed, or
from the group itself for a stateless group torch.distributed has no record of.
(_pg_map and _ranks cover torch 1.13, which CI's CPU tests run; vLLM needs 2.x.)"""
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d


def _pg_map():
    world = getattr(c10d, "_world", None)
    return world.pg_map if world is not None else c10d._pg_map


def _ranks(group):
    if hasattr(dist, "get_process_group_ranks"):
        return dist.get_process_group_ranks(group)
    return sorted(c10d._pg_group_ranks[group])


class DeviceCommunicatorBase:
    def __init__(self, cpu_group, device=None, device_group=None, unique_name="",
                 global_ranks=None, global_world_size=None, use_all2all=False):
        self.device = device or torch.device("cpu")
        self.cpu_group = cpu_group
        self.device_group = device_group
        self.unique_name = unique_name
        is_stateless = _pg_map().get(cpu_group, None) is None
        if is_stateless:
            self.rank = cpu_group.rank()
            self.world_size = cpu_group.size()
            assert global_ranks is not None
            assert global_world_size is not None
            self.ranks = global_ranks
            self.global_rank = self.ranks[self.rank]
            self.global_world_size = global_world_size
            self.rank_in_group = self.rank
        else:
            self.rank = dist.get_rank(cpu_group)
            self.world_size = dist.get_world_size(cpu_group)
            self.ranks = _ranks(cpu_group)
            self.global_rank = dist.get_rank()
            self.global_world_size = dist.get_world_size()
            self.rank_in_group = self.ranks.index(self.global_rank)  # dist.get_group_rank
        self.use_all2all = use_all2all
        self.all2all_manager = None

    # DeviceCommunicatorBase.all_gather / reduce_scatter: dim is moved to the
    # front, the collective runs along dimension 0 on device_group and the
    # result is moved back. The real ones call all_gather_into_tensor /
    # reduce_scatter_tensor; gloo under torch 1.13 has neither, so the fake
    # gathers a list and reduces with all_reduce (the same values).
    def all_gather(self, input_, dim=-1):
        if dim < 0:
            dim += input_.dim()
        parts = [torch.empty_like(input_) for _ in range(self.world_size)]
        dist.all_gather(parts, input_.contiguous(), group=self.device_group)
        return torch.cat(parts, dim=dim)

    def reduce_scatter(self, input_, dim=-1):
        if dim < 0:
            dim += input_.dim()
        t = input_.movedim(0, dim).contiguous()
        assert t.shape[0] % self.world_size == 0
        chunk = t.shape[0] // self.world_size
        s = t.clone()
        dist.all_reduce(s, group=self.device_group)
        out = s[self.rank_in_group * chunk:(self.rank_in_group + 1) * chunk]
        return out.movedim(0, dim).contiguous()
