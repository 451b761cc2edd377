"""Follows sgl-project/sglang python/sglang/srt/server_args.py: the two
settings the adapter reads, and get_global_server_args() (raises until set)."""
from dataclasses import dataclass


@dataclass
class ServerArgs:
    enable_flashinfer_allreduce_fusion: bool = False
    enable_symm_mem: bool = False


_global_server_args = None


def set_global_server_args_for_scheduler(server_args):
    global _global_server_args
    _global_server_args = server_args


def get_global_server_args():
    if _global_server_args is None:
        raise ValueError("Global server args is not set yet!")
    return _global_server_args
