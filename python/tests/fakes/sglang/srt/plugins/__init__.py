"""Follows sgl-project/sglang python/sglang/srt/plugins/__init__.py @0298b5b4:
load_plugins() loads the `sglang.srt.plugins` entry points SGLANG_PLUGINS
allows (comma-separated, stripped; unset: all), runs each, then
HookRegistry.apply_hooks(). Once per process."""
import os
from importlib.metadata import entry_points

from sglang.srt.plugins.hook_registry import HookRegistry

GENERAL_PLUGINS_GROUP = "sglang.srt.plugins"
_plugins_loaded = False


def load_plugins():
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    allowed_str = os.environ.get("SGLANG_PLUGINS")
    allowed = None
    if allowed_str:
        allowed = {x.strip() for x in allowed_str.split(",") if x.strip()}
    eps = entry_points()
    discovered = eps.select(group=GENERAL_PLUGINS_GROUP) if hasattr(eps, "select") \
        else eps.get(GENERAL_PLUGINS_GROUP, [])
    for ep in discovered:
        if allowed is not None and ep.name not in allowed:
            continue
        ep.load()()
    HookRegistry.apply_hooks()
