"""Follows vllm-project/vllm vllm/config/compilation.py (PassConfig's
fuse_allreduce_rms, enable_sp, fuse_gemm_comms; stored copy index id 58529540095)
and vllm/config/__init__.py's get_current_vllm_config_or_none /
set_current_vllm_config."""
import contextlib
from dataclasses import dataclass, field


@dataclass
class PassConfig:
    fuse_allreduce_rms: bool = None
    enable_sp: bool = None
    fuse_gemm_comms: bool = None


@dataclass
class CompilationConfig:
    pass_config: PassConfig = field(default_factory=PassConfig)


@dataclass
class VllmConfig:
    compilation_config: CompilationConfig = field(default_factory=CompilationConfig)


_current = None


@contextlib.contextmanager
def set_current_vllm_config(config):
    global _current
    old, _current = _current, config
    try:
        yield
    finally:
        _current = old


def get_current_vllm_config_or_none():
    return _current
