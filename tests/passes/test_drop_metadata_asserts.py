"""torch.export's ``x.to(dtype)`` leaves a conversion (a no-op to x's own dtype) and a metadata assert
between the ops; both go where they check or convert nothing, so the norm and its residual add fuse."""

import numpy as np
import pytest
import torch
from exporting import TORCH_FORMS, call_targets, export_torch, float64_reference, optimize_checked
from graphopt.passes.canonicalize import drop_metadata_asserts
from test_drop_noop_casts import RealCast, T5StyleNorm, args

from graphopt.frontends.torch_export import from_exported_program
from graphopt.ir import DType, Graph, Op


class LlamaStyleNorm(torch.nn.Module):
    """A residual add, then transformers' LlamaRMSNorm: statistics in float32, the result converted back
    to the input's dtype, then scaled."""

    def __init__(self, d=16):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, x, r):
        h = x + r
        dtype = h.dtype
        f = h.to(torch.float32)
        f = f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * f.to(dtype), h


ASSERT = "aten._assert_tensor_metadata.default"


@pytest.mark.parametrize("form", TORCH_FORMS)
@pytest.mark.parametrize("module_class", [LlamaStyleNorm, T5StyleNorm])
def test_noop_conversion_and_its_assert_go_and_the_residual_add_fuses(form, module_class):
    module, inputs = module_class(), args()
    program = export_torch(module, inputs, form)
    assert ASSERT in call_targets(program)
    optimized, report = optimize_checked(program)
    assert report.rule_counts.get("drop_metadata_assert", 0) >= 1
    assert report.rule_counts.get("fold_norm_scale") == 1
    assert report.rule_counts.get("fuse_add_norm") == 1
    names = call_targets(optimized)
    assert ASSERT not in names and "aten.to.dtype" not in names
    got = optimized.module()(*inputs)
    for actual, want in zip(got, float64_reference(module, inputs), strict=True):
        np.testing.assert_allclose(actual.detach().numpy(), want, rtol=1e-5, atol=1e-5)


def test_without_the_pass_an_assert_reads_the_norm_and_its_scale_stays_out():
    program = export_torch(LlamaStyleNorm(), args(), "decomposed")
    optimized, report = optimize_checked(program, skip=["drop_metadata_asserts"])
    assert "fold_norm_scale" not in report.rule_counts
    assert ASSERT in call_targets(optimized)


@pytest.mark.parametrize("form", TORCH_FORMS)
def test_conversions_that_convert_stay(form):
    inputs = (torch.randn(4, 8),)
    optimized, report = optimize_checked(export_torch(RealCast(), inputs, form))
    conversions = [t for t in call_targets(optimized) if t in ("aten.to.dtype", "aten._to_copy.default")]
    assert len(conversions) == 2
    assert "drop_noop_cast" not in report.rule_counts
    np.testing.assert_array_equal(optimized.module()(*inputs).numpy(), RealCast()(*inputs).numpy())


class Checked(torch.nn.Module):
    def forward(self, x):
        torch.ops.aten._assert_tensor_metadata.default(x, dtype=torch.float32)
        return torch.tanh(x)


def test_an_assert_of_sizes_stays_verbatim():
    program = torch.export.export(Checked(), (torch.randn(4, 8),))
    (check,) = [n for n in program.graph.nodes if str(n.target) == ASSERT]
    check.args = (check.args[0], [4, 8], *check.args[2:])  # (tracing one trips over torch's fake kernel)
    graph = from_exported_program(program)
    assert not graph.nodes_of(Op.ASSERT_METADATA)
    optimized, report = optimize_checked(program)
    assert ASSERT in call_targets(optimized)
    assert "drop_metadata_assert" not in report.rule_counts


def test_an_assert_the_ir_types_do_not_answer_stays():
    graph = Graph("g")
    x = graph.add_input("x", DType.FLOAT32, (2, 3))
    graph.add_node(Op.ASSERT_METADATA, [x], {"dtype": DType.FLOAT16}, outputs=[])
    graph.set_outputs([x])
    stats = drop_metadata_asserts.PASS.run(graph)
    assert not stats.counts
    assert len(graph.nodes_of(Op.ASSERT_METADATA)) == 1
