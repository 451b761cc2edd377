"""Follows vllm-project/vllm vllm/distributed/device_communicators/
custom_all_reduce.py's interface: CustomAllreduce(group, device,
symm_mem_enabled), disabled, should_custom_ar, custom_all_reduce, capture().
Off a GPU the real one disables itself; tests turn this one on with TAKES
(it then takes every tensor, as the real one takes those up to its max size)."""
import contextlib

import torch.distributed as dist

TAKES = False


class CustomAllreduce:
    def __init__(self, group, device, symm_mem_enabled=False):
        self.group = group
        self.disabled = not TAKES

    def should_custom_ar(self, inp):
        return not self.disabled

    def custom_all_reduce(self, inp):
        out = inp.clone()
        dist.all_reduce(out, group=self.group)
        return out

    @contextlib.contextmanager
    def capture(self):
        yield
