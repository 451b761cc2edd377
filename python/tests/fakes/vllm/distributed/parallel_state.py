"""Follows vllm-project/vllm vllm/distributed/parallel_state.py:
--disable-custom-all-reduce reaches the communicators as
_ENABLE_CUSTOM_ALL_REDUCE, set before the groups are made."""
_ENABLE_CUSTOM_ALL_REDUCE = True


def set_custom_all_reduce(enable):
    global _ENABLE_CUSTOM_ALL_REDUCE
    _ENABLE_CUSTOM_ALL_REDUCE = enable


def graph_capture(device_communicator, stream=None):
    """GroupCoordinator.graph_capture's communicator part: only custom
    all-reduce gets a capture context (ca_comm.capture()); quick reduce needs
    none (its buffers are registered at init). The stream switch is CUDA's."""
    import contextlib
    ca_comm = device_communicator.ca_comm
    stack = contextlib.ExitStack()
    if stream is not None:
        import torch
        stream.wait_stream(torch.cuda.current_stream())
        stack.enter_context(torch.cuda.stream(stream))
    if ca_comm is not None:
        stack.enter_context(ca_comm.capture())
    return stack
