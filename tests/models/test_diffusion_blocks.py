"""Diffusion-style models (models/diffusion_blocks.py, in the shape of diffusers' UNet2D and
AutoencoderKL blocks) through both ONNX exporters and torch.export: every ``group_norm → silu`` fused,
the residual sums read by a next block's norm folded in, outputs as the float64 original's."""

import numpy as np
import pytest
import torch
from exporting import (
    ONNX_PATHS,
    TORCH_FORMS,
    call_targets,
    export_onnx,
    export_torch,
    feeds_for,
    float64_reference,
    op_types,
    optimize_checked,
    run_onnx,
)

from models.diffusion_blocks import TinyUNet, TinyVAEDecoder, randomize_norms, unet_inputs, vae_inputs

MODELS = {"unet": (TinyUNet, unet_inputs), "vae": (TinyVAEDecoder, vae_inputs)}
GROUP_NORM_SILU = 7  # per model (see its docstring)
ADDS_IN_FRONT = 2
TOLERANCE = 1e-4


def build(name):
    torch.manual_seed(0)
    module, make_inputs = MODELS[name]
    return randomize_norms(module().eval()), make_inputs()


@pytest.mark.slow
@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_group_norm_silu_fuses_through_onnx(name, path):
    module, args = build(name)
    model = export_onnx(module, args, path)
    assert op_types(model).count("InstanceNormalization") == GROUP_NORM_SILU
    optimized, report = optimize_checked(model)
    types = op_types(optimized)
    assert types.count("GroupNormAct") == GROUP_NORM_SILU
    assert "InstanceNormalization" not in types
    assert report.rule_counts["fuse_add_group_norm_act"] == ADDS_IN_FRONT
    (out,) = run_onnx(optimized, feeds_for(optimized, args))
    np.testing.assert_allclose(out, float64_reference(module, args)[0], rtol=TOLERANCE, atol=TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize("form", TORCH_FORMS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_group_norm_silu_fuses_through_torch_export(name, form):
    module, args = build(name)
    optimized, report = optimize_checked(export_torch(module, args, form))
    targets = call_targets(optimized)
    fused = targets.count("graphopt.group_norm_act.default") + targets.count(
        "graphopt.add_group_norm_act.default"
    )
    assert fused == GROUP_NORM_SILU
    assert not any("native_group_norm" in t or t == "aten.group_norm.default" for t in targets)
    assert report.rule_counts["fuse_add_group_norm_act"] == ADDS_IN_FRONT
    with torch.no_grad():
        out = optimized.module()(*args)
    np.testing.assert_allclose(
        out.numpy(), float64_reference(module, args)[0], rtol=TOLERANCE, atol=TOLERANCE
    )


@pytest.mark.slow
@pytest.mark.parametrize("path", [*ONNX_PATHS, "exported"])
def test_float16_decoder_fuses_through_every_path(path):
    module, args = build("vae")
    module, args = module.half(), tuple(a.half() for a in args)
    model = export_torch(module, args, path) if path == "exported" else export_onnx(module, args, path)
    _, report = optimize_checked(model)
    assert (
        report.rule_counts["fuse_group_norm_act"] + report.rule_counts["fuse_add_group_norm_act"]
        == GROUP_NORM_SILU
    )
