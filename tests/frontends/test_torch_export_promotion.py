"""A binary aten op whose float operands differ in width reads as a Cast of the narrower one and the op,
which is what torch computes; every other promotion stays verbatim."""

import warnings

import numpy as np
import torch
from exporting import near_misses
from torch import nn

import graphopt
from graphopt.frontends.torch_export import from_exported_program
from graphopt.ir import DType, Op


class _Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _export(module, *inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(module.eval(), inputs)


def _ops(program):
    return [n.op for n in from_exported_program(program)]


def test_a_narrower_float_operand_is_cast_to_the_result_dtype():
    program = _export(_Lambda(lambda x, y: x * y), torch.randn(2, 8, dtype=torch.bfloat16), torch.randn(2, 8))
    graph = from_exported_program(program)
    (cast,) = graph.nodes_of(Op.CAST)
    assert cast.attrs["to"] == DType.FLOAT32 and cast.input(0).dtype == DType.BFLOAT16
    (mul,) = graph.nodes_of(Op.MUL)
    assert mul.input(0) is cast.output and mul.output.dtype == DType.FLOAT32


def test_other_promotions_stay_verbatim():
    bf16, ints = torch.randn(2, 8, dtype=torch.bfloat16), torch.arange(16).reshape(2, 8)
    # a 0-d float32 tensor does not widen a bfloat16 one: the result is bfloat16
    zero_dim = _export(_Lambda(lambda x, s: x * s), bf16, torch.tensor(3.0))
    assert _ops(zero_dim) == ["aten:mul.Tensor"]
    mixed_kinds = _export(_Lambda(lambda x, i: x.float() + i), bf16, ints)
    assert "aten:add.Tensor" in _ops(mixed_kinds)


class T5Norm(nn.Module):
    """A residual add, then T5's RMS norm in a 16-bit model: the variance from a float32 copy, the
    16-bit sum times a float32 reciprocal root (a promoting multiply), converted back, then scaled."""

    def __init__(self, d=32, dtype=torch.bfloat16):
        super().__init__()
        self.weight = nn.Parameter((torch.rand(d) + 0.5).to(dtype))

    def forward(self, x, r):
        h = x + r
        variance = h.to(torch.float32).pow(2).mean(-1, keepdim=True)
        y = (h * torch.rsqrt(variance + 1e-6)).to(self.weight.dtype)
        return self.weight * y, h


def test_t5_norm_in_bfloat16_fuses_its_residual_add_between_casts():
    module = T5Norm()
    inputs = tuple(torch.randn(4, 8, 32, dtype=torch.bfloat16) for _ in range(2))
    optimized, report = graphopt.optimize(_export(module, *inputs), check_each_pass=True)
    assert report.verification["ok"], report.verification["summary"]
    assert report.rule_counts.get("fuse_add_norm_between_casts") == 1
    assert any("multiplies in bfloat16 after" in r for r in near_misses(report, "fold_norm_scale_after_cast"))
    with torch.no_grad():
        got = [t.double().numpy() for t in optimized.module()(*inputs)]
        x, r = (t.double() for t in inputs)
        h = x + r
        want = [module.weight.double() * h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6), h]
    for actual, expected in zip(got, want, strict=True):
        # (bfloat16 keeps 8 bits: a few roundings of values of a few units)
        np.testing.assert_allclose(actual, expected.numpy(), rtol=0, atol=0.05)
