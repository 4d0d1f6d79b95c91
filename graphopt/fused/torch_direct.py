"""Eager calls of the fused ops without custom_op's autograd layer.

A call of ``torch.ops.graphopt.norm_act`` enters Python twice through the dispatcher: first custom_op's
autograd kernel, which wraps the call in a generated ``autograd.Function`` (or, where no gradient is
needed, redispatches below autograd), then the CPU or CUDA kernel. Where nothing below autograd
would see the call (no Python mode, no functionalization, no tensor subclass: the next key is the
backend itself), the first entry can do the work at once. ``register`` puts such a kernel at the
AutogradCPU and AutogradCUDA keys:

- no gradient needed (``no_grad``, ``inference_mode``, or no input that requires one): the op's eager
  kernel runs there and then;
- a gradient needed (an exported program's ``module()`` called as is: its parameters require
  gradients): one lean ``autograd.Function`` runs the eager kernel and records the op's backward.
  custom_op's own path costs several times more host time per call (metadata objects, a second
  dispatch into Python, default filling), which made an optimized program slower than the
  original's native ops in eager mode.

Every other call (a Python mode, torch.compile, torch.export, a fake tensor) goes on to the autograd
implementation custom_op generates, unchanged. Where this torch lacks the private pieces used here,
the ops keep custom_op's own autograd kernel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

log = logging.getLogger(__name__)

_KEYS = ("AutogradCPU", "AutogradCUDA")


def register(
    library: torch.library.Library,
    op,
    eager_kernel: Callable,
    backward: Callable | None = None,
    setup_context: Callable | None = None,
) -> None:
    """Registers the direct eager path of custom op ``op`` (a ``CustomOpDef``) in ``library``;
    ``backward`` and ``setup_context`` are the op's autograd formula (as ``register_autograd`` takes
    them), None where it has none."""
    try:
        from torch._library.autograd import make_autograd_impl

        generic = make_autograd_impl(op._opoverload, op)
        after_autograd = torch._C._after_autograd_keyset
        backends = frozenset((torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA))
        grad_enabled, any_requires_grad = torch._C.is_grad_enabled, torch._C._any_requires_grad
    except (ImportError, AttributeError) as error:
        log.debug("no direct eager path for %s: %s", op, error)
        return
    recorded = None if backward is None else _recording_function(op, eager_kernel, backward, setup_context)

    def kernel(keyset, *args):
        if (keyset & after_autograd).highestPriorityTypeId() not in backends:
            return generic(keyset, *args)
        if not (grad_enabled() and any_requires_grad(*args)):
            return eager_kernel(*args)
        if recorded is None:
            return generic(keyset, *args)
        return recorded.apply(*args)

    name = op._opoverload._schema.name.split("::")[1]
    for key in _KEYS:
        library.impl(name, kernel, key, with_keyset=True)


def _recording_function(op, eager_kernel: Callable, backward: Callable, setup_context: Callable | None):
    """An ``autograd.Function`` whose forward is the eager kernel itself (autograd is off inside it)
    and whose backward is the op's formula, with the op's own context set-up."""

    def forward(ctx, *args):
        result = eager_kernel(*args)
        if setup_context is not None:
            setup_context(ctx=ctx, inputs=args, output=result)
        return result

    name = "Recorded_" + op._opoverload._schema.name.replace("::", "_")
    methods = {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    return type(name, (torch.autograd.Function,), methods)
