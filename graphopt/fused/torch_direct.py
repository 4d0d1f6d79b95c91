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
  gradients): the op runs as the native ops it replaced (its ``math``), which autograd records in
  C++ as it records them in the unfused program, in its precision (``torch_math.storage_precision``).
  custom_op's generated ``autograd.Function`` costs several times their host time per call, which
  made an optimized program slower than the original in eager mode, and the gradients are the
  unfused program's own.

Every other call (a Python mode, torch.compile, torch.export, a fake tensor) goes on to the autograd
implementation custom_op generates, unchanged, except one that needs a gradient of an op with no
autograd formula of its own (``formula=False``): that one runs as its ``math`` too, so torch.compile
of a module whose parameters require gradients traces the native ops (and derives their backward)
instead of failing on a custom op it cannot differentiate. Where this torch lacks the private pieces
used here, the ops keep custom_op's own autograd kernel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from graphopt.fused.torch_math import storage_precision

log = logging.getLogger(__name__)


def register(
    library: torch.library.Library,
    op,
    eager_kernels: dict[str, Callable],
    math: Callable | None = None,
    formula: bool = True,
) -> None:
    """Registers the direct eager path of custom op ``op`` (a ``CustomOpDef``) in ``library``, with its
    eager kernel per backend (``"CPU"``, ``"CUDA"``); ``math`` computes the op with the native ops it
    replaced (None: calls that need a gradient go through the op's autograd formula); ``formula``
    says whether the op has an autograd formula (without one, every call that needs a gradient runs
    its ``math``)."""
    try:
        from torch._library.autograd import make_autograd_impl

        generic = make_autograd_impl(op._opoverload, op)
        after_autograd = torch._C._after_autograd_keyset
        backends = frozenset((torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA))
        grad_enabled, any_requires_grad = torch._C.is_grad_enabled, torch._C._any_requires_grad
    except (ImportError, AttributeError) as error:
        log.debug("no direct eager path for %s: %s", op, error)
        return

    def direct(eager_kernel: Callable) -> Callable:
        def kernel(keyset, *args):
            plain = (keyset & after_autograd).highestPriorityTypeId() in backends
            if not (grad_enabled() and any_requires_grad(*args)):
                return eager_kernel(*args) if plain else generic(keyset, *args)
            if math is not None and (plain or not formula):
                return storage_precision(math, args)
            return generic(keyset, *args)

        return kernel

    name = op._opoverload._schema.name.split("::")[1]
    for backend, eager_kernel in eager_kernels.items():
        library.impl(name, direct(eager_kernel), f"Autograd{backend}", with_keyset=True)
