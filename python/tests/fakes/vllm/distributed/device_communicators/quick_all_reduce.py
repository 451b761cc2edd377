"""Follows vllm-project/vllm vllm/distributed/device_communicators/
quick_all_reduce.py @02cdf876 from the outside: QuickAllReduce(group, device)
with disabled, should_quick_allreduce, quick_all_reduce and close. It
stands for vLLM's native ROCm quick reduce where the fake CudaCommunicator
builds one (IS_ROCM), and takes nothing: tests only look at who holds the
slot and whether it was closed (INSTANCES: every one made, in order)."""

INSTANCES = []


class QuickAllReduce:
    def __init__(self, group, device):
        INSTANCES.append(self)
        self.group = group
        self.device = device
        self.disabled = False
        self.closed = False

    def should_quick_allreduce(self, inp):
        return False

    def quick_all_reduce(self, inp, *, out=None):
        raise AssertionError("the fake native quick reduce takes nothing")

    def close(self):
        self.closed = True
        self.disabled = True
