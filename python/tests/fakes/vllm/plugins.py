"""Follows vllm-project/vllm vllm/plugins/__init__.py @01425553:
load_general_plugins() runs, once per process, every `vllm.general_plugins`
entry point that VLLM_PLUGINS (None: all) allows."""
import vllm.envs as envs

DEFAULT_PLUGINS_GROUP = "vllm.general_plugins"
plugins_loaded = False


def load_plugins_by_group(group):
    from importlib.metadata import entry_points
    eps = entry_points()
    discovered = eps.select(group=group) if hasattr(eps, "select") else eps.get(group, [])
    allowed = envs.VLLM_PLUGINS
    return {p.name: p.load() for p in discovered if allowed is None or p.name in allowed}


def load_general_plugins():
    global plugins_loaded
    if plugins_loaded:
        return
    plugins_loaded = True
    for func in load_plugins_by_group(DEFAULT_PLUGINS_GROUP).values():
        func()
