"""Adapters that plug quickreduce into serving stacks: vllm (a general plugin)
and sglang (an opt-in patch). Neither stack is imported until used."""
