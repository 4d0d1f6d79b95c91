"""The fused ops as PyTorch operators in namespace ``graphopt`` (``torch.ops.graphopt.*``).

Each op is a ``torch.library.triton_op`` whose body launches the Triton kernel of
``graphopt.kernels`` on CUDA, wrapped with ``torch.library.wrap_triton`` so that torch.compile
sees the kernel, and runs the plain-PyTorch math of ``torch_math`` on every other device. Each op
also has an explicit fake implementation (needed under ``TRITON_INTERPRET=1``, and cheaper than
tracing the body) and an autograd formula. torch.export keeps each op as one node.

Eager calls skip the layers of Python that ``triton_op`` puts around its body (they exist for
tracing): the same body is registered directly as the CPU and CUDA kernel, launching the Triton
kernel through a cached launcher (``torch_launch``) rather than Triton's JIT dispatch. That saves
microseconds per call, which matters for small launches.

Importing this module registers the ops, once; it imports no Triton kernel until a CUDA tensor
arrives, so it works on machines without a GPU, and without Triton.
"""

import contextlib
import importlib.util

import torch
from torch import Tensor

from graphopt.fused import torch_math, torch_triton
from graphopt.fused.table import NORM_ACT, NORM_ACT_LINEAR, Activation, Norm

NAMESPACE = "graphopt"

# String arguments are parsed on every call: plain dict look-ups keep that off the profile.
_NORMS = {n.attr: n for n in Norm}
_ACTIVATIONS = {a.attr: a for a in Activation}

# triton_op searches each body for Triton kernels as it registers the op, and logs a warning per op
# where Triton is not installed (a CPU-only install, where no kernel can launch anyway): there the
# same bodies become plain custom ops.
_op = torch.library.triton_op if importlib.util.find_spec("triton") is not None else torch.library.custom_op

# Direct eager kernels (see the module's docstring); the object must live as long as the ops.
_EAGER = torch.library.Library(NAMESPACE, "IMPL")


def _norm(text: str) -> Norm:
    norm = _NORMS.get(text)
    return norm if norm is not None else Norm.parse(text)  # parse raises the clear error


def _activation(text: str) -> Activation:
    activation = _ACTIVATIONS.get(text)
    return activation if activation is not None else Activation.parse(text)


def _first_norm_dim(x: Tensor, axis: int) -> int:
    rank = x.dim()
    dim = axis + rank if axis < 0 else axis
    torch._check(0 <= dim < rank, lambda: f"axis {axis} is out of range for a tensor of rank {rank}")
    return dim


def _check_arguments(x: Tensor, norm: str, activation: str, axis: int) -> None:
    """Raises on what the real implementation would reject, so tracing fails where eager would."""
    _norm(norm)
    _activation(activation)
    _first_norm_dim(x, axis)


@contextlib.contextmanager
def _no_kernel_scan():
    """Defines triton ops without torch's scan of their bodies for Triton kernels (torch 2.13 and
    later scan at definition, for ahead-of-time packaging): the scan imports Inductor and Dynamo,
    1.5 s, which ``import graphopt`` must not cost, and it finds nothing here anyway, the kernels
    being imported only when a CUDA tensor arrives."""
    from torch._library import triton as library_triton

    scan = getattr(library_triton, "get_inner_triton_kernels", None)
    if scan is None:
        yield
        return
    library_triton.get_inner_triton_kernels = lambda fn: []
    try:
        yield
    finally:
        library_triton.get_inner_triton_kernels = scan


def _define_op(name: str):
    def define(fn):
        with _no_kernel_scan():
            return _op(f"{NAMESPACE}::{name}", mutates_args=())(fn)

    return define


def _register_eager(name: str, body) -> None:
    """Registers ``body`` (with an identity ``wrap``) as the CPU and CUDA kernel of op ``name``."""

    def kernel(*args):
        return body(*args, wrap=torch_triton.eager_launch)

    for key in ("CPU", "CUDA"):
        _EAGER.impl(name, kernel, key)


def _cast(grad: Tensor | None, like: Tensor | None) -> Tensor | None:
    return None if grad is None or like is None else grad.to(like.dtype)


# --- norm_act -------------------------------------------------------------------------------------


def _norm_act(x, weight, bias, norm, activation, eps, axis, wrap):
    n, a, dim = _norm(norm), _activation(activation), _first_norm_dim(x, axis)
    if x.is_cuda:
        return torch_triton.norm_act(x, weight, bias, None, n, a, eps, dim, wrap)[0]
    return torch_math.norm_act(x, weight, bias, n, a, eps, dim)


@_define_op(NORM_ACT.torch_name)
def norm_act(
    x: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    norm: str,
    activation: str,
    eps: float,
    axis: int,
) -> Tensor:
    """activation(norm(x) * weight + bias), normalizing over dimensions [axis, rank)."""
    return _norm_act(x, weight, bias, norm, activation, eps, axis, torch.library.wrap_triton)


_register_eager(NORM_ACT.torch_name, _norm_act)


@norm_act.register_fake
def _(x, weight, bias, norm, activation, eps, axis):
    _check_arguments(x, norm, activation, axis)
    return x.new_empty(x.shape)


def _norm_act_setup(ctx, inputs, output):
    x, weight, bias, norm, activation, eps, axis = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.params = (_norm(norm), _activation(activation), eps, _first_norm_dim(x, axis))


def _norm_act_backward(ctx, grad_y):
    x, weight, bias = ctx.saved_tensors
    grad_x, grad_w, grad_b = torch_math.norm_act_backward(
        grad_y, x, weight, bias, *ctx.params, needs=tuple(ctx.needs_input_grad[:3])
    )
    return _cast(grad_x, x), _cast(grad_w, weight), _cast(grad_b, bias), None, None, None, None


norm_act.register_autograd(_norm_act_backward, setup_context=_norm_act_setup)


# --- add_norm_act -------------------------------------------------------------------------------


def _add_norm_act(x, residual, weight, bias, norm, activation, eps, axis, wrap):
    n, a, dim = _norm(norm), _activation(activation), _first_norm_dim(x, axis)
    if x.is_cuda:
        return torch_triton.norm_act(x, weight, bias, residual, n, a, eps, dim, wrap)
    s = torch_math.residual_sum(x, residual)
    return torch_math.norm_act(s, weight, bias, n, a, eps, dim), s


@_define_op(f"add_{NORM_ACT.torch_name}")
def add_norm_act(
    x: Tensor,
    residual: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    norm: str,
    activation: str,
    eps: float,
    axis: int,
) -> tuple[Tensor, Tensor]:
    """(activation(norm(x + residual) * weight + bias), x + residual)."""
    return _add_norm_act(x, residual, weight, bias, norm, activation, eps, axis, torch.library.wrap_triton)


_register_eager(f"add_{NORM_ACT.torch_name}", _add_norm_act)


@add_norm_act.register_fake
def _(x, residual, weight, bias, norm, activation, eps, axis):
    _check_arguments(x, norm, activation, axis)
    torch._check(residual.shape == x.shape, lambda: "residual must have the shape of x")
    return x.new_empty(x.shape), x.new_empty(x.shape)


def _add_norm_act_setup(ctx, inputs, output):
    x, residual, weight, bias, norm, activation, eps, axis = inputs
    ctx.save_for_backward(output[1], weight, bias)
    ctx.dtypes = (x.dtype, residual.dtype)
    ctx.params = (_norm(norm), _activation(activation), eps, _first_norm_dim(x, axis))


def _add_norm_act_backward(ctx, grad_y, grad_sum):
    s, weight, bias = ctx.saved_tensors
    needs_x, needs_r, needs_w, needs_b = ctx.needs_input_grad[:4]
    grad_s, grad_w, grad_b = torch_math.norm_act_backward(
        grad_y, s, weight, bias, *ctx.params, needs=(needs_x or needs_r, needs_w, needs_b)
    )
    if grad_s is not None and grad_sum is not None:
        grad_s = grad_s + grad_sum
    x_dtype, r_dtype = ctx.dtypes
    grad_x = grad_s.to(x_dtype) if needs_x else None
    grad_r = grad_s.to(r_dtype) if needs_r else None
    return grad_x, grad_r, _cast(grad_w, weight), _cast(grad_b, bias), None, None, None, None


add_norm_act.register_autograd(_add_norm_act_backward, setup_context=_add_norm_act_setup)


# --- norm_act_linear ----------------------------------------------------------------------------


def _norm_act_linear(
    x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation, wrap
):
    n, a, out = _norm(norm), _activation(activation), _activation(out_activation)
    args = (x, weight, bias, linear_weight, linear_bias, n, a, eps, out)
    if x.is_cuda:
        return torch_triton.norm_act_linear(*args, wrap)
    return torch_math.norm_act_linear(*args)


@_define_op(NORM_ACT_LINEAR.torch_name)
def norm_act_linear(
    x: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    linear_weight: Tensor,
    linear_bias: Tensor | None,
    norm: str,
    activation: str,
    eps: float,
    out_activation: str,
) -> Tensor:
    """out_activation(activation(norm(x) * weight + bias) @ linear_weight.T + linear_bias)."""
    return _norm_act_linear(
        x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation,
        torch.library.wrap_triton,
    )  # fmt: skip


_register_eager(NORM_ACT_LINEAR.torch_name, _norm_act_linear)


@norm_act_linear.register_fake
def _(x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation):
    _check_arguments(x, norm, activation, -1)
    _activation(out_activation)
    torch._check(x.dim() >= 1, lambda: "x must have at least one dimension")
    torch._check(
        linear_weight.dim() == 2 and linear_weight.shape[1] == x.shape[-1],
        lambda: f"linear_weight must be [K, {x.shape[-1]}], got {list(linear_weight.shape)}",
    )
    return x.new_empty((*x.shape[:-1], linear_weight.shape[0]))


def _norm_act_linear_setup(ctx, inputs, output):
    x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation = inputs
    ctx.save_for_backward(x, weight, bias, linear_weight, linear_bias)
    ctx.params = (_norm(norm), _activation(activation), eps, _activation(out_activation))


def _norm_act_linear_backward(ctx, grad_y):
    saved = ctx.saved_tensors
    grads = torch_math.norm_act_linear_backward(
        grad_y, *saved, *ctx.params, needs=tuple(ctx.needs_input_grad[:5])
    )
    return (*(_cast(g, t) for g, t in zip(grads, saved, strict=True)), None, None, None, None)


norm_act_linear.register_autograd(_norm_act_linear_backward, setup_context=_norm_act_linear_setup)


# --- ops of the fused-op folders ------------------------------------------------------------------

# The helpers above, for the ops defined in their own folders (graphopt/fused/<op>/torch_impl.py).
define_op, register_eager, parse_activation = _define_op, _register_eager, _activation

from graphopt.fused.group_norm_act import torch_impl as _group_norm_act  # noqa: E402, F401  (registers it)
