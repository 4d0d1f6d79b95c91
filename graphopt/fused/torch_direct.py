"""Inference calls of the fused ops without custom_op's autograd layer.

A call of ``torch.ops.graphopt.norm_act`` enters Python twice through the dispatcher: first custom_op's
autograd kernel (which, where no gradient is needed, redispatches below autograd), then the CPU or
CUDA kernel. Where no gradient is needed and nothing below autograd would see the call (no Python
mode, no functionalization, no tensor subclass: the next key is the backend itself), the first
entry can run the op's eager kernel at once. ``register`` puts such a kernel at the AutogradCPU and
AutogradCUDA keys; every other call (a gradient needed, torch.compile, torch.export, a fake tensor)
goes on to the autograd implementation custom_op generates, unchanged.

Where this torch lacks the private pieces it uses, the ops keep custom_op's own autograd kernel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

log = logging.getLogger(__name__)

_KEYS = ("AutogradCPU", "AutogradCUDA")


def register(library: torch.library.Library, op, eager_kernel: Callable) -> None:
    """Registers the direct inference path of custom op ``op`` (a ``CustomOpDef``) in ``library``."""
    try:
        from torch._library.autograd import make_autograd_impl

        generic = make_autograd_impl(op._opoverload, op)
        after_autograd = torch._C._after_autograd_keyset
        backends = frozenset((torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA))
        grad_enabled, any_requires_grad = torch._C.is_grad_enabled, torch._C._any_requires_grad
    except (ImportError, AttributeError) as error:
        log.debug("no direct inference path for %s: %s", op, error)
        return

    def kernel(keyset, *args):
        if (keyset & after_autograd).highestPriorityTypeId() in backends and not (
            grad_enabled() and any_requires_grad(*args)
        ):
            return eager_kernel(*args)
        return generic(keyset, *args)

    name = op._opoverload._schema.name.split("::")[1]
    for key in _KEYS:
        library.impl(name, kernel, key, with_keyset=True)
