"""Running models: ``runners`` runs an ONNX model in ONNX Runtime or an ExportedProgram in torch on
concrete inputs (the numeric check, the speed guard, ``graphopt bench``); ``program_calls`` calls an
optimized torch program cheaply (``direct_callable``, ``cuda_graphed``, ``to_device``).

The three calls are importable from here; torch is imported only when one of them is asked for.
"""

from __future__ import annotations

__all__ = ["cuda_graphed", "direct_callable", "to_device"]


def __getattr__(name: str):
    if name in __all__:
        from . import program_calls

        return getattr(program_calls, name)
    raise AttributeError(f"module 'graphopt.runtime' has no attribute {name!r}")
