"""Eager launches of the NormAct kernel from a plan kept per call signature.

Everything a launch derives from its arguments' shapes, strides, dtypes and device and from the op's
attributes (the row view, the launch tier and grid, the kernel's scalar arguments, which pointer
stands in for an absent input, the compiled kernel and how its launcher takes arguments) is worked
out on the first call of a signature and kept. A later call of that signature looks its plan up,
allocates the outputs, checks that its pointers are 16-byte aligned (what Triton specializes
pointers on) and launches: no reshapes, no re-validation, no per-argument specialization key.

``norm_act`` returns None where no plan applies (no rows, rows that are not a strided view, a weight
that is not contiguous, a pointer that is not aligned, another current device); the caller then
takes the general path of ``torch_triton``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from graphopt.fused.spec import Activation, Norm
from graphopt.fused.torch_launch import LaunchVariant

# (torch.cuda.current_device checks lazy initialization on every call; the ops run only on
# initialized devices here, their tensors being on them already)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device

MAX_PLANS = 4096  # signatures kept; a program whose shapes keep changing starts over past this
_ALIGN = 16
_NO_PLAN = object()  # cached for signatures no plan serves
_PLANS: dict[tuple, object] = {}

Parse = Callable[[torch.Tensor, str, str, int], tuple[Norm, Activation, int]]


def _signature(t: torch.Tensor | None):
    return None if t is None else (t.shape, t.stride(), t.dtype)


def norm_act(x, weight, bias, residual, norm: str, activation: str, eps: float, axis: int, parse: Parse):
    """(y, residual sum or None) of NormAct on CUDA tensors, or None where no plan applies. The op's
    attributes come as the op takes them; ``parse`` turns them into the kernel's, once per plan (and
    raises on bad ones, as the op must)."""
    key = (
        x.shape, x.stride(), x.dtype, x.device, _signature(weight), _signature(bias), _signature(residual),
        norm, activation, eps, axis,
    )  # fmt: skip
    plan = _PLANS.get(key)
    if plan is None:
        n, a, dim = parse(x, norm, activation, axis)
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = _NormActPlan.make(x, weight, bias, residual, n, a, eps, dim)
    return None if plan is _NO_PLAN else plan(x, weight, bias, residual)


def clear() -> None:
    _PLANS.clear()


def _row_stride(t: torch.Tensor, cols: int) -> int | None:
    """The row stride of ``t`` seen as [rows, cols] rows with a contiguous last dimension, or None
    where that needs a copy."""
    rows = t.reshape(-1, cols)
    if rows.stride(-1) != 1 or rows.untyped_storage().data_ptr() != t.untyped_storage().data_ptr():
        return None
    return rows.stride(0)


def _is_flat(t: torch.Tensor | None, cols: int) -> bool:
    return t is None or (t.numel() == cols and t.is_contiguous())


class _NormActPlan:
    """One signature's launch: outputs' shape, the grid, the kernel's non-tensor arguments."""

    @classmethod
    def make(cls, x, weight, bias, residual, norm, activation, eps, dim):
        cols = x.shape[dim:].numel()
        if x.numel() == 0 or not (_is_flat(weight, cols) and _is_flat(bias, cols)):
            return _NO_PLAN
        stride_x = _row_stride(x, cols)
        stride_r = 0 if residual is None else _row_stride(residual, cols)
        if stride_x is None or stride_r is None or (residual is not None and residual.shape != x.shape):
            return _NO_PLAN
        from graphopt.fused.norm_act.triton_kernel import dtype_name, norm_act_config, norm_act_kernel
        from graphopt.kernels.launch_rules import is_aligned

        names = list(norm_act_kernel.arg_names)
        constexprs = ("BLOCK_M", "BLOCK_N", "ITERS", "LOOPED", "EVEN")
        if tuple(names[-len(constexprs) :]) != constexprs:
            return _NO_PLAN  # the launcher protocol below assumes trailing constexprs
        rows = x.numel() // cols
        config = norm_act_config(rows, cols, dtype_name(x), is_aligned(cols, (stride_x, stride_r)))
        return cls(x, residual is not None, rows, cols, stride_x, stride_r, config, (
            float(eps), int(norm), int(activation),
            int(weight is not None), int(bias is not None), int(residual is not None),
            # (inner, groups) of scale, bias and residual: nothing broadcast (a plan serves no other)
            1, 1, 1, 1, 1, rows,
        ))  # fmt: skip

    def __init__(self, x, has_residual, rows, cols, stride_x, stride_r, config, attributes):
        from graphopt.fused.norm_act.triton_kernel import norm_act_kernel

        tier = config.tier
        self.kernel = norm_act_kernel
        self.shape, self.dtype, self.device = x.shape, x.dtype, x.device
        self.device_index = x.device.index
        self.has_residual = has_residual
        self.grid = config.grid
        self.scalars = (rows, cols, stride_x, stride_r, *attributes)
        self.constexprs = {
            "BLOCK_M": tier.block_m, "BLOCK_N": tier.block_n, "ITERS": tier.iters, "LOOPED": tier.looped,
            "EVEN": tier.exact,
        }  # fmt: skip
        self.num_warps = tier.num_warps
        self.variant = None  # the compiled kernel and its launcher's protocol, after the first launch
        self.tail: tuple | None = None  # what follows the pointers in a direct launch, once known

    def __call__(self, x, weight, bias, residual):
        if _current_device() != self.device_index:
            return None
        y = torch.empty(self.shape, dtype=self.dtype, device=self.device)
        # The kernel writes the sum only with a residual, so ``y`` can stand in for it otherwise
        # (eager only: traced, two aliased outputs would be copied apart; see launch_norm_act).
        s = torch.empty(self.shape, dtype=self.dtype, device=self.device) if self.has_residual else y
        r = x if residual is None else residual
        w = x if weight is None else weight
        b = x if bias is None else bias
        if (x.data_ptr() | r.data_ptr() | w.data_ptr() | b.data_ptr()) % _ALIGN:
            return None  # Triton would compile another variant: leave it to the JIT
        if self.tail is not None:
            self.variant.compiled[self.grid](x, r, w, b, y, s, *self.tail)
        else:
            self._launch((x, r, w, b, y, s))
        return y, (s if self.has_residual else None)

    def _launch(self, pointers: tuple) -> None:
        """The first launches: through Triton's JIT (compiling if needed) to get the compiled kernel,
        then through ``torch_launch``'s variant, which finds how its launcher takes arguments."""
        args = (*pointers, *self.scalars)
        if self.variant is None:
            compiled = self.kernel[self.grid](*args, **self.constexprs, num_warps=self.num_warps)
            if compiled is not None:
                positions = [(len(args) + i, name) for i, name in enumerate(self.constexprs)]
                self.variant = LaunchVariant(compiled, positions)
            return
        self.variant.launch(self.grid, args, self.constexprs)
        if self.variant.with_constexprs is not None:
            constexprs = tuple(self.constexprs.values()) if self.variant.with_constexprs else ()
            self.tail = (*self.scalars, *constexprs)
