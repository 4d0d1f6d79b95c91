"""``import graphopt`` makes ``torch.ops.graphopt.*`` available, without importing torch itself.

A program that graphopt optimized holds graphopt's fused ops; ``torch.export.load`` and ``.module()``
resolve them by name, so they must be registered before torch reads such a program. Registering
imports torch, which ``import graphopt`` must not do (the kernels' ahead-of-time build, the ONNX-only
user): where torch is already imported, the ops are registered at once (about 35 ms); otherwise a
finder on ``sys.meta_path`` registers them right after torch's own import finishes, whenever that is.
"""

from __future__ import annotations

import sys

# (No importlib.abc, importlib.util or logging here: importing them costs more than the rest of
# ``import graphopt``; the finder and loader below are plain classes of the protocols' methods.)


def register_with_torch() -> None:
    """Registers the torch ops now if torch is imported, else as soon as it is."""
    torch = sys.modules.get("torch")
    if torch is not None and not getattr(getattr(torch, "__spec__", None), "_initializing", False):
        _register()
    elif not any(isinstance(finder, _AfterTorch) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterTorch())


def _register() -> None:
    try:
        import graphopt.fused.torch_ops  # noqa: F401  (registers torch.ops.graphopt.*)
    except Exception as error:  # a torch too old or broken: graphopt's other uses still work
        import logging

        logging.getLogger(__name__).warning("graphopt's torch ops are not registered: %s", error)


class _AfterTorch:
    """Finds nothing itself: it wraps the loader of ``torch`` so the ops register after torch's import."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # once
        spec = next((s for f in sys.meta_path if (s := f.find_spec(name, path, target)) is not None), None)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _RegisteringLoader(spec.loader)
        return spec


class _RegisteringLoader:
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        # torch's module keeps its own loader (importlib.resources and others read it)
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _register()

    def __getattr__(self, name: str):
        return getattr(self.loader, name)
