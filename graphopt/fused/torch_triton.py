"""Glue between torch tensors and the fused ops' Triton launchers (each op's ``triton_kernel.py``).

The launchers take [rows, cols] views with a contiguous last dimension and preallocated
contiguous outputs; these functions shape the op's arguments that way. ``wrap`` is
``torch.library.wrap_triton`` when tracing (so torch.compile sees the kernel) and ``eager_launch`` in
eager mode. The kernel modules are imported on first use: importing them needs Triton.
"""

from __future__ import annotations

import functools
import importlib

import torch
from torch import Tensor

from graphopt.dependencies import require

# Eager launches go through ``torch_launch.cached`` (a bench turns it off to compare).
CACHED_LAUNCH = True


def no_wrap(kernel):
    return kernel


def eager_launch(kernel):
    """The ``wrap`` of eager calls: the kernel's cached launcher (see ``torch_launch``)."""
    if not CACHED_LAUNCH:
        return kernel
    from graphopt.fused.torch_launch import cached

    return cached(kernel)


def scratch(wrap, numel: int, dtype: torch.dtype, device) -> Tensor:
    """Uninitialized memory that a body's launches share and that outlives no call (partial results
    one kernel writes and the next reads). Ask for it here, not with ``torch.empty``: a launch plan
    (``torch_launch_plans``) allocates a scratch tensor afresh on every call, where it must refuse to
    replay a launch that reads any other tensor the body made (it cannot tell one from a copy of an
    input). ``wrap`` is the body's own."""
    make = getattr(wrap, "scratch", None)
    if make is not None:
        return make(numel, dtype, device)
    return torch.empty(numel, dtype=dtype, device=device)


def _require_triton() -> None:
    require("triton", "running graphopt's fused ops on CUDA tensors")


@functools.cache
def launcher(module: str, name: str):
    """The Python launcher ``name`` of the Triton kernel module ``module``, imported on first use
    (importing it needs Triton)."""
    _require_triton()
    return getattr(importlib.import_module(module), name)


def rows_view(t: Tensor, cols) -> Tensor:
    """``t`` as [rows, cols] with a contiguous last dimension; a view where strides allow."""
    if t.dim() == 2 and t.shape[1] == cols and t.stride(1) == 1:
        return t  # the common case, kept free of tensor calls (each costs microseconds)
    t2d = t.reshape(-1, cols)
    return t2d if t2d.stride(-1) == 1 else t2d.contiguous()


def flat(t: Tensor | None) -> Tensor | None:
    if t is None or (t.dim() == 1 and t.stride(0) == 1):
        return t
    return t.reshape(-1).contiguous()


def empty_rows(t2d: Tensor) -> Tensor:
    return torch.empty_like(t2d, memory_format=torch.contiguous_format)


def shaped(t2d: Tensor, shape) -> Tensor:
    return t2d if t2d.shape == shape else t2d.view(shape)
