import re
import warnings

import numpy as np
import onnx
import pytest
import torch
from fused_checks import assert_close, session
from onnx import helper

from graphopt.fused import DOMAIN, NORM_ACT, NORM_ACT_LINEAR, export, register_torch_ops

ops = register_torch_ops()
SHAPE, K = (2, 3, 16), 5


class AllOps(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(SHAPE[1:]))
        self.shift = torch.nn.Parameter(torch.randn(SHAPE[-1]))
        self.proj = torch.nn.Linear(SHAPE[-1], K)

    def forward(self, x, residual):
        y, residual_sum = ops.add_norm_act(x, residual, self.scale, None, "layer", "gelu", 1e-5, 1)
        y = ops.norm_act(y, None, self.shift, "rms", "silu", 1e-6, -1)
        out = ops.norm_act_linear(
            y, self.shift, None, self.proj.weight, self.proj.bias, "rms", "relu", 1e-5, "tanh"
        )
        return out, residual_sum


EXPECTED_NODES = [
    ("NormAct", 4, 2, {"norm": "layer", "activation": "gelu", "epsilon": 1e-5, "axis": 1}),
    ("NormAct", 3, 1, {"norm": "rms", "activation": "silu", "epsilon": 1e-6, "axis": -1}),
    ("NormActLinear", 5, 1, {"norm": "rms", "activation": "relu", "epsilon": 1e-5, "out_activation": "tanh"}),
]


def graphopt_nodes(model):
    """(op_type, inputs, outputs, attributes) of each graphopt node, absent trailing inputs dropped."""
    found = []
    for node in model.graph.node:
        if node.domain != DOMAIN:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        attrs = {k: v.decode() if isinstance(v, bytes) else pytest.approx(v) for k, v in attrs.items()}
        inputs = list(node.input)
        while inputs and not inputs[-1]:
            inputs.pop()
        found.append((node.op_type, len(inputs), len(node.output), attrs))
    return found


def reference(module, x, residual):
    """float64 reference of AllOps from the fused-op table."""
    p = {name: t.detach().double().numpy() for name, t in module.named_parameters()}
    y, residual_sum = NORM_ACT.reference(
        x, p["scale"], None, residual, norm="layer", activation="gelu", epsilon=1e-5, axis=1
    )
    y, _ = NORM_ACT.reference(y, None, p["shift"], norm="rms", activation="silu", epsilon=1e-6, axis=-1)
    out = NORM_ACT_LINEAR.reference(
        y, p["shift"], None, p["proj.weight"], p["proj.bias"],
        norm="rms", activation="relu", epsilon=1e-5, out_activation="tanh",
    )  # fmt: skip
    return out, residual_sum


@pytest.mark.parametrize(
    ("dynamo", "opset", "dtype"),
    [(True, 18, "float32"), (False, 17, "float32"), (False, 17, "float16")],
    ids=["dynamo", "torchscript", "torchscript-float16"],
)
def test_export_translates_ops_and_runs_without_the_library(dynamo, opset, dtype, tmp_path):
    t = getattr(torch, dtype)
    module = AllOps().to(t).eval()
    x, residual = torch.randn(SHAPE, dtype=t), torch.randn(SHAPE, dtype=t)
    path = tmp_path / "model.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning))  # the TorchScript exporter's
        model = export(module, (x, residual), path, dynamo=dynamo, opset_version=opset)

    assert graphopt_nodes(model) == EXPECTED_NODES
    # (an absent scale or bias of a known width is a constant of the function: ``_fill<shape>_<type>``)
    assert sorted(re.sub(r"_fill[0-9x]+_[a-z0-9]+$", "", f.overload) for f in model.functions) == [
        "layer_gelu_eps1e-05_axis1_scale_residual_residualsum",
        "rms_relu_eps1e-05_out-tanh_scale_linearbias",
        "rms_silu_eps1e-06_axis-1_bias",
    ]
    onnx.checker.check_model(onnx.load(path), full_check=True)

    x, residual = torch.randn(SHAPE, dtype=t), torch.randn(SHAPE, dtype=t)
    feeds = dict(zip([i.name for i in model.graph.input], (x.numpy(), residual.numpy()), strict=True))
    got = session(model).run(None, feeds)
    with torch.no_grad():
        eager = [out.float().numpy() for out in module(x, residual)]
    expected = reference(module, x.double().numpy(), residual.double().numpy())
    for onnx_out, eager_out, reference_out in zip(got, eager, expected, strict=True):
        assert onnx_out.dtype == np.dtype(dtype)
        assert_close(onnx_out, reference_out, dtype)
        assert_close(onnx_out, eager_out, dtype)
