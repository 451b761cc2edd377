"""Follows sgl-project/sglang python/sglang/srt/plugins/hook_registry.py
@106f37ce: HookRegistry.register(target, hook, hook_type=AFTER),
apply_hooks() (resolve the dotted target, wrap, setattr), the AFTER wrapper
hook(result, *args, **kwargs), reset(). REPLACE/AROUND/BEFORE and the
propagation to other modules are left out."""
import functools
import pkgutil
from collections import defaultdict
from enum import Enum


class HookType(Enum):
    BEFORE = "before"
    AFTER = "after"
    AROUND = "around"
    REPLACE = "replace"


class HookRegistry:
    _hooks = defaultdict(list)
    _patched = set()

    @classmethod
    def register(cls, target, hook, hook_type=HookType.AFTER, *, source=None):
        cls._hooks[target].append((hook_type, hook, source))

    @classmethod
    def apply_hooks(cls):
        for target, hooks in sorted(cls._hooks.items()):
            if target in cls._patched:
                continue
            obj_path, attr_name = target.rsplit(".", 1)
            obj = pkgutil.resolve_name(obj_path)
            wrapped = getattr(obj, attr_name)
            for hook_type, hook, _ in hooks:
                assert hook_type == HookType.AFTER, "the fake applies AFTER hooks only"
                wrapped = _wrap_after(wrapped, hook)
            setattr(obj, attr_name, wrapped)
            cls._patched.add(target)

    @classmethod
    def reset(cls):
        cls._hooks.clear()
        cls._patched.clear()


def _wrap_after(original_fn, hook):
    @functools.wraps(original_fn)
    def wrapper(*args, **kwargs):
        result = original_fn(*args, **kwargs)
        modified = hook(result, *args, **kwargs)
        return modified if modified is not None else result

    wrapper.__wrapped__ = original_fn
    return wrapper
