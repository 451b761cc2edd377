"""One import hook for the adapters: runs after_exec(module) right after one
of `names` is first executed, by wrapping that module's own loader (the
.pth route into SGLang, and FlashInfer's fusion modules in both stacks)."""
import importlib.abc
import importlib.util
import sys


class AfterImportHook(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Subclasses define after_exec(module); insert into sys.meta_path."""

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self._inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self.after_exec(module)

    def after_exec(self, module):
        raise NotImplementedError
