"""AffineAct as a torch op (CPU math), as an ONNX fallback function, and through both ONNX exporters."""

import numpy as np
import onnx
import pytest
import torch
from fused_checks import ACTIVATIONS, assert_close, newest_ort_opset, session
from onnx import TensorProto, helper

from graphopt.fused import export, register_torch_ops
from graphopt.fused.affine_act.spec import AFFINE_ACT
from graphopt.fused.onnx_functions import attach_functions
from graphopt.fused.spec import DOMAIN, DOMAIN_VERSION

ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}
TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# (shape, axis): a linear layer's bias, a batch norm over NCHW, a channel in the middle counted from the end.
LAYOUTS = {"bias": ((2, 3, 16), -1), "nchw": ((2, 4, 3, 5), 1), "middle": ((2, 5, 3, 4), -3)}


def reference(x, scale, bias, activation, axis):
    return AFFINE_ACT.reference(x, scale, bias, activation=activation, axis=axis)


def arrays(shape, axis, dtype, seed=0):
    rng = np.random.default_rng(seed)
    channels = shape[axis]
    x = (rng.standard_normal(shape) * 2).astype(dtype)
    return x, (rng.standard_normal(channels) + 1).astype(dtype), rng.standard_normal(channels).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_torch_op_on_cpu_matches_reference(layout, activation, dtype):
    shape, axis = LAYOUTS[layout]
    x, s, b = (torch.from_numpy(a).to(TORCH[dtype]) for a in arrays(shape, axis, "float32"))
    y = register_torch_ops().affine_act(x, s, b, activation, axis)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert_close(y.double().numpy(), reference(x.double(), s.double(), b.double(), activation, axis), dtype)


def test_torch_op_checks_its_arguments():
    ops = register_torch_ops()
    x = torch.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match=r"scale must have shape \[3\], got \[4\]"):
        ops.affine_act(x, torch.ones(4), None, "relu", 1)
    with pytest.raises(RuntimeError, match="axis 3 is out of range"):
        ops.affine_act(x, None, None, "relu", 3)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        ops.affine_act(x, None, None, "swish", -1)


def test_torch_op_passes_opcheck():
    op = register_torch_ops().affine_act.default
    x = torch.randn(2, 3, 4)
    torch.library.opcheck(
        op, (x, torch.rand(3) + 0.5, torch.randn(3), "gelu", 1), test_utils=("test_schema", "test_faketensor")
    )


def fallback_model(present, activation, axis, shape, dtype, opset):
    elem = ELEM[dtype]
    channels = shape[axis]
    inputs = [helper.make_tensor_value_info("x", elem, shape)]
    names = []
    for port in ("Scale", "Bias"):
        if port in present:
            inputs.append(helper.make_tensor_value_info(port.lower(), elem, [channels]))
        names.append(port.lower() if port in present else "")
    node = helper.make_node(
        "AffineAct", ["x", *names], ["y"], domain=DOMAIN, activation=activation, axis=axis
    )
    graph = helper.make_graph([node], "affine", inputs, [helper.make_tensor_value_info("y", elem, shape)])
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


@pytest.mark.parametrize("opset", (14, 18, newest_ort_opset()))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("present", [(), ("Scale",), ("Bias",), ("Scale", "Bias")])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_fallback_function_matches_reference(layout, present, dtype, opset):
    shape, axis = LAYOUTS[layout]
    for activation in ACTIVATIONS:
        model = fallback_model(present, activation, axis, shape, dtype, opset)
        attach_functions(model)
        onnx.checker.check_model(model, full_check=True)
        x, s, b = arrays(shape, axis, dtype)
        feeds = {
            "x": x,
            **({"scale": s} if "Scale" in present else {}),
            **({"bias": b} if "Bias" in present else {}),
        }
        (y,) = session(model).run(None, feeds)
        want = reference(
            x, s if "Scale" in present else None, b if "Bias" in present else None, activation, axis
        )
        assert y.dtype == np.dtype(dtype)
        assert_close(y, want, dtype)


def test_fallback_overload_names_say_activation_axis_and_ports():
    model = fallback_model(("Bias",), "gelu_tanh", 1, (2, 3, 4), "float32", 18)
    attach_functions(model)
    assert [f.overload for f in model.functions] == ["gelu_tanh_axis1_bias"]
    assert model.graph.node[0].overload == "gelu_tanh_axis1_bias"


class BiasGelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 12, bias=False)
        self.bias = torch.nn.Parameter(torch.randn(12))
        self.bn_scale = torch.nn.Parameter(torch.rand(3) + 0.5)
        self.bn_shift = torch.nn.Parameter(torch.randn(3))

    def forward(self, x, image):
        ops = register_torch_ops()
        return ops.affine_act(self.linear(x), None, self.bias, "gelu", -1), ops.affine_act(
            image, self.bn_scale, self.bn_shift, "silu", 1
        )


@pytest.mark.parametrize("dynamo", [True, False])
def test_both_exporters_write_affine_act_nodes_that_run_without_the_library(dynamo):
    module = BiasGelu().eval()
    x, image = torch.randn(2, 5, 8), torch.randn(2, 3, 4, 4)
    model = export(module, (x, image), dynamo=dynamo)
    nodes = [n for n in model.graph.node if n.domain == DOMAIN]
    assert sorted(n.op_type for n in nodes) == ["AffineAct", "AffineAct"]
    attrs = sorted(tuple(sorted((a.name, helper.get_attribute_value(a)) for a in n.attribute)) for n in nodes)
    assert attrs == [(("activation", b"gelu"), ("axis", -1)), (("activation", b"silu"), ("axis", 1))]
    names = [i.name for i in model.graph.input]
    got = session(model).run(None, dict(zip(names, (x.numpy(), image.numpy()), strict=True)))
    with torch.no_grad():
        want = module(x, image)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w.numpy(), "float32")
