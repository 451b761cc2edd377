"""Follows vllm-project/vllm vllm/envs.py (stored copy, index id 66428353334):
variables are read at attribute access through the same lambdas."""
import os

environment_variables = {
    "VLLM_BATCH_INVARIANT": lambda: bool(int(os.getenv("VLLM_BATCH_INVARIANT", "0"))),
    "VLLM_PLUGINS": lambda: (None if "VLLM_PLUGINS" not in os.environ
                             else os.environ["VLLM_PLUGINS"].split(",")),
}


def __getattr__(name):
    if name in environment_variables:
        return environment_variables[name]()
    raise AttributeError(name)
