"""The fusion passes on torch.export programs, as exported and after run_decompositions()."""

import numpy as np
import pytest
import torch
from exporting import TORCH_FORMS, call_targets, export_torch, float64_reference, optimize_checked
from test_batch_split_chains import POSITIVE as HORIZONTAL
from test_fuse_norm_act import POSITIVE as VERTICAL

from models.split_stack import SplitStack

LATER_FUSIONS = ["fuse_norm_act", "fuse_norm_act_linear", "fuse_batch_norm_act", "fuse_bias_act"]


@pytest.mark.parametrize("form", TORCH_FORMS)
def test_seed_is_one_view_and_one_chain_then_one_kernel(form):
    module = SplitStack(n=8, b=16, d=32)
    args = (torch.randn(8 * 16 * 32),)
    batched, _ = optimize_checked(export_torch(module, args, form), skip=LATER_FUSIONS)
    names = call_targets(batched)
    assert not any(op in t for t in names for op in ("split", "stack", "cat", "unbind", "select", "slice"))
    assert sum("layer_norm" in t for t in names) == 1 and sum("tanh" in t for t in names) == 1
    assert sum(t.startswith("aten.view") or "reshape" in t for t in names) >= 1
    fused, _ = optimize_checked(export_torch(module, args, form))
    # (a reshape, not a view: whether its input is contiguous depends on where the program runs)
    assert call_targets(fused) == ["aten.reshape.default", "graphopt.norm_act_linear.default"]
    (expected,) = float64_reference(module, args)
    np.testing.assert_allclose(fused.module()(*args).detach().numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", TORCH_FORMS)
@pytest.mark.parametrize(
    "case", ["per_slice_affine_stack0", "per_slice_linear", "rms_silu_axis1", "unbind", "slices", "gathers"]
)
def test_per_slice_chains_batch(case, form):
    module, args = HORIZONTAL[case]()
    optimized, report = optimize_checked(export_torch(module, args, form), skip=LATER_FUSIONS)
    assert report.rule_counts.get("batch_split_chains") == 1
    (expected,) = float64_reference(module, args)
    np.testing.assert_allclose(optimized.module()(*args).detach().numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", TORCH_FORMS)
@pytest.mark.parametrize(
    "case", ["layer_gelu", "layer_gelu_tanh", "rms_silu", "decomposed_layer_gelu", "residual_gelu"]
)
def test_norm_and_activation_fuse(case, form):
    make, activation, _ = VERTICAL[case]
    module = make()
    args = (torch.randn(3, 4, 16),)
    optimized, _ = optimize_checked(export_torch(module, args, form))
    fused = [n for n in optimized.graph.nodes if n.op == "call_function" and "graphopt" in str(n.target)]
    assert len(fused) == 1
    assert activation in fused[0].args
    expected = float64_reference(module, args)
    np.testing.assert_allclose(optimized.module()(*args).detach().numpy(), expected[0], rtol=1e-4, atol=1e-5)
