"""graphopt: a graph-rewriting optimizer for exported model graphs.

import graphopt
optimized, report = graphopt.optimize("model.onnx", output="model.opt.onnx")

Importing graphopt registers its fused ops with torch (``torch.ops.graphopt.*``) when torch is
imported, before or after graphopt, so ``torch.export.load`` reads an optimized program.
"""

from __future__ import annotations

from .torch_registration import register_with_torch

__version__ = "0.1.0"

__all__ = ["BadInput", "Optimized", "VerificationError", "__version__", "optimize"]

# The API is imported on first use: ``import graphopt.kernels`` (the build's kernel compiler, for one)
# must not pull in the pipeline, torch or onnx.
_LAZY = {
    "optimize": "api",
    "Optimized": "api",
    "BadInput": "errors",
    "VerificationError": "errors",
}


register_with_torch()


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'graphopt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
