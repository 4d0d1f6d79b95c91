"""What each fused op's ``torch_impl.py`` provides per torch form (``IMPLS``, by form name)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TorchImpl:
    # (*arguments in schema order, wrap) -> result(s): Triton on CUDA, plain torch elsewhere.
    # ``wrap`` is torch.library.wrap_triton when traced, the cached eager launcher otherwise.
    body: Callable
    fake: Callable  # (*arguments) -> empty result(s) of the right shapes; checks what body would
    backward: Callable | None = None  # torch.library.register_autograd's backward ...
    setup_context: Callable | None = None  # ... and setup_context
    # (*arguments) -> result(s) computed by the native ops the fusion replaced, on any device: the CPU
    # implementation, and an eager call's where a gradient is needed (autograd records those ops as
    # it records them in the unfused program). None: such calls go through the autograd formula.
    math: Callable | None = None
