"""The AffineAct torch op (``torch.ops.graphopt.affine_act``): CPU math, CUDA launch, fake.

``register(define_op, register_eager)`` defines it with the helpers of ``graphopt.fused.torch_ops``,
which calls it once: a ``triton_op`` whose body launches the Triton kernel on CUDA (wrapped for
torch.compile when traced) and runs plain torch in float32 elsewhere, plus a direct eager kernel.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from graphopt.dependencies import require
from graphopt.fused import torch_math
from graphopt.fused.affine_act.spec import AFFINE_ACT
from graphopt.fused.table import Activation

_ACTIVATIONS = {a.attr: a for a in Activation}


def activation_of(text: str) -> Activation:
    activation = _ACTIVATIONS.get(text)
    return activation if activation is not None else Activation.parse(text)  # (parse raises clearly)


def channel_dim(x: Tensor, axis: int) -> int:
    rank = x.dim()
    dim = axis + rank if axis < 0 else axis
    torch._check(0 <= dim < rank, lambda: f"axis {axis} is out of range for a tensor of rank {rank}")
    return dim


def _check_weight(name: str, weight: Tensor | None, channels) -> None:
    if weight is not None:
        torch._check(
            weight.dim() == 1 and weight.shape[0] == channels,
            lambda: f"{name} must have shape [{channels}], got {list(weight.shape)}",
        )


def check_arguments(x: Tensor, scale: Tensor | None, bias: Tensor | None, activation: str, axis: int) -> int:
    """The channel dim; raises on what the kernels would reject, so tracing fails where eager would."""
    activation_of(activation)
    dim = channel_dim(x, axis)
    _check_weight("scale", scale, x.shape[dim])
    _check_weight("bias", bias, x.shape[dim])
    return dim


def affine_act_cpu(
    x: Tensor, scale: Tensor | None, bias: Tensor | None, activation: Activation, dim: int
) -> Tensor:
    """act(x * scale + bias) in float32 (float64 for float64 x), in x's dtype."""
    cd = torch_math.compute_dtype(x.dtype)
    shape = [1] * x.dim()
    shape[dim] = -1
    z = x.to(cd)
    if scale is not None:
        z = z * scale.to(cd).view(shape)
    if bias is not None:
        z = z + bias.to(cd).view(shape)
    return torch_math.activate(activation, z).to(x.dtype).contiguous()


@functools.cache
def _launcher():
    require("triton", "running graphopt's fused ops on CUDA tensors")
    from graphopt.fused.affine_act.triton_kernel import launch_affine_act

    return launch_affine_act


def _flat(t: Tensor | None) -> Tensor | None:
    return t if t is None or t.is_contiguous() else t.contiguous()


def affine_act_cuda(x, scale, bias, activation: Activation, dim: int, wrap) -> Tensor:
    """The Triton launch: X as [rows, cols] with the channel as the column (channel axis last) or
    as ``row % channels`` (the dims after it are the columns)."""
    x = x if x.is_contiguous() else x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    channels = x.shape[dim]
    per_row = dim != x.dim() - 1
    cols = x.shape[dim + 1 :].numel() if per_row else channels
    _launcher()(
        x.view(-1, cols), _flat(scale), _flat(bias), y.view(-1, cols),
        channels=channels, per_row=per_row, activation=int(activation), wrap=wrap,
    )  # fmt: skip
    return y


def _body(x, scale, bias, activation, axis, wrap):
    dim = check_arguments(x, scale, bias, activation, axis)  # (the kernel would read past a short scale)
    kind = activation_of(activation)
    if x.is_cuda:
        return affine_act_cuda(x, scale, bias, kind, dim, wrap)
    return affine_act_cpu(x, scale, bias, kind, dim)


def register(define_op, register_eager):
    """Defines ``graphopt::affine_act`` with ``torch_ops``'s helpers; returns the op."""

    @define_op(AFFINE_ACT.torch_name)
    def affine_act(
        x: Tensor, scale: Tensor | None, bias: Tensor | None, activation: str, axis: int
    ) -> Tensor:
        """activation(x * scale + bias), scale and bias of shape [x.shape[axis]]."""
        return _body(x, scale, bias, activation, axis, torch.library.wrap_triton)

    register_eager(AFFINE_ACT.torch_name, _body)

    @affine_act.register_fake
    def _(x, scale, bias, activation, axis):
        check_arguments(x, scale, bias, activation, axis)
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    return affine_act
