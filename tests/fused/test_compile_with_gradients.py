"""torch.compile of graphopt's ops where parameters require gradients (an optimized program's
``module()`` as is): the ops without an autograd formula of their own (AffineAct, GroupNormAct)
compile as the native ops they stand for, with the unfused program's values and gradients, instead
of failing in AOT autograd on a custom op it cannot differentiate (GPT-2's tanh-GELU after a bias,
diffusers' group norms)."""

import pytest
import torch
import torch.nn.functional as F

from graphopt.fused import register_torch_ops

ops = register_torch_ops()


def randn(*shape, mean=0.0, std=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * std + mean).float()


def affine_act(x, s, b):
    return ops.affine_act(x, s, b, "gelu_tanh", -1)


def affine_act_unfused(x, s, b):
    return F.gelu(x * s + b, approximate="tanh")


def group_norm_act(x, s, b):
    return ops.group_norm_act(x, s, b, 2, "silu", 1e-5)


def group_norm_act_unfused(x, s, b):
    return F.silu(F.group_norm(x, 2, s, b, 1e-5))


def add_group_norm_act(x, s, b):
    y, total = ops.add_group_norm_act(x, x.flip(0), s, b, 2, "silu", 1e-5)
    return y + total


def add_group_norm_act_unfused(x, s, b):
    total = x + x.flip(0)
    return F.silu(F.group_norm(total, 2, s, b, 1e-5)) + total


CASES = {
    "affine_act": (affine_act, affine_act_unfused, (3, 5, 16), 16),
    "group_norm_act": (group_norm_act, group_norm_act_unfused, (2, 4, 3, 5), 4),
    "add_group_norm_act": (add_group_norm_act, add_group_norm_act_unfused, (2, 4, 3, 5), 4),
}


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_call_with_parameters_that_require_gradients_matches_the_unfused_ops(name):
    fused, unfused, shape, channels = CASES[name]
    torch._dynamo.reset()
    x = randn(*shape, mean=50.0, std=3.0)
    params = [randn(channels, mean=1.0, seed=1).requires_grad_(), randn(channels, seed=2).requires_grad_()]
    y = torch.compile(fused, fullgraph=True, backend="aot_eager")(x, *params)
    weights = randn(*shape, seed=3)
    grads = torch.autograd.grad((y * weights).sum(), params)

    wanted_params = [p.detach().double().requires_grad_() for p in params]
    want = unfused(x.double(), *wanted_params)
    want_grads = torch.autograd.grad((want * weights.double()).sum(), wanted_params)
    torch.testing.assert_close(y.double(), want.detach(), rtol=1e-5, atol=1e-5 * want.abs().max().item())
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=1e-4 * expected.abs().max().item())
