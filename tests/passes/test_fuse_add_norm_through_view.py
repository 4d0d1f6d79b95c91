"""A residual add whose sum is viewed (rows flattened, as OPT's decoder layer does before its MLP's
norm) before the norm fuses into one NormAct on the viewed operands, through every export path; a view
that changes the normalized dims, a sum read before the view and a broadcast residual stay."""

import numpy as np
import pytest
import torch
from exporting import (
    ONNX_PATHS,
    call_targets,
    export_onnx,
    export_torch,
    feeds_for,
    float64_reference,
    near_misses,
    op_types,
    optimize_checked,
    run_onnx,
)
from torch import nn

ARGS = (torch.randn(2, 8, 16),)


class FlattenedResidual(nn.Module):
    """OPT's decoder layer around its MLP: the residual stream flattened to rows, normalized, the MLP,
    and the second residual sum viewed back, read by the next norm. ``case``: "regrouped" views the
    sum so that the norm's dims split, "sum_read" also returns the sum before its view, "broadcast"
    adds a residual of another shape."""

    def __init__(self, act=None, case="plain", d=16):
        super().__init__()
        self.mix, self.up, self.down = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.norm, self.final = nn.LayerNorm(4 if case == "regrouped" else d), nn.LayerNorm(d)
        self.bias = nn.Parameter(torch.randn(8, d))
        for norm in (self.norm, self.final):
            nn.init.normal_(norm.weight)
            nn.init.normal_(norm.bias)
        self.act, self.case = act, case

    def forward(self, x):
        shape = x.shape
        mixed = self.mix(x)
        total = x + (self.bias if self.case == "broadcast" else mixed)
        if self.case == "regrouped":  # (a view that splits the normalized dim)
            normed = self.norm(total.reshape(2, 8, 4, 4)).reshape(-1, 16)
            return self.final((total.reshape(-1, 16) + self.down(torch.relu(self.up(normed)))).view(shape))
        rows = total.reshape(-1, total.size(-1))
        h = self.norm(rows)
        h = torch.relu(h) if self.act == "relu" else h
        out = self.final((rows + self.down(torch.relu(self.up(h)))).view(shape))
        return (out, total) if self.case == "sum_read" else out


@pytest.mark.parametrize("act", [None, "relu"])
@pytest.mark.parametrize("path", ONNX_PATHS)
def test_a_flattened_residual_sum_fuses_into_its_norm(path, act):
    torch.manual_seed(0)
    module = FlattenedResidual(act).eval()
    model = export_onnx(module, ARGS, path)
    optimized, report = optimize_checked(model)
    counts = report.rule_counts
    # (the MLP's norm, with or without its activation, and the final norm of the viewed-back sum)
    assert counts.get("fuse_add_norm_act_through_view", 0) == (act is not None)
    assert counts.get("fuse_add_norm_through_view") == 2 - (act is not None)
    ops = op_types(optimized)
    # (the MLP's norm takes its Linear(16, 32) too where NormActLinear's width limit admits it)
    assert "LayerNormalization" not in ops and ops.count("NormAct") + ops.count("NormActLinear") == 2
    (got,) = run_onnx(optimized, feeds_for(model, ARGS))
    np.testing.assert_allclose(got, float64_reference(module, ARGS)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", ["exported", "decomposed"])
def test_a_flattened_residual_sum_fuses_into_its_norm_in_torch(form):
    torch.manual_seed(0)
    module = FlattenedResidual().eval()
    optimized, report = optimize_checked(export_torch(module, ARGS, form))
    assert report.rule_counts.get("fuse_add_norm_through_view") == 2
    calls = call_targets(optimized)
    fused = calls.count("graphopt.add_norm_act.default") + calls.count("graphopt.add_norm_act_linear.default")
    assert fused == 2 and not any("layer_norm" in c for c in calls)
    got = optimized.module()(*ARGS).detach().numpy()
    np.testing.assert_allclose(got, float64_reference(module, ARGS)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("regrouped", "changes the dims that norm"),
        ("sum_read", "is a graph output"),
        ("broadcast", "broadcasts its operands"),
    ],
)
@pytest.mark.parametrize("path", ONNX_PATHS)
def test_these_stay_with_a_near_miss(case, reason, path):
    torch.manual_seed(0)
    module = FlattenedResidual(case=case).eval()
    model = export_onnx(module, ARGS, path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts.get("fuse_add_norm_through_view") == 1  # (the final norm's)
    assert op_types(optimized).count("LayerNormalization") == 1
    assert any(reason in r for r in near_misses(report, "fuse_add_norm_through_view"))
    (got,) = run_onnx(optimized, feeds_for(model, ARGS))[:1]
    np.testing.assert_allclose(got, float64_reference(module, ARGS)[0], rtol=1e-5, atol=1e-5)
