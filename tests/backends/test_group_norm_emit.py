"""Group norm written by the backends where a pass made it (a recognized group norm whose original
nodes could not be given back): ONNX as the exporters' Reshape → InstanceNormalization → Reshape →
Mul → Add, valid at every opset; torch as aten.group_norm. Both against the float64 reference."""

import numpy as np
import pytest
import torch
from exporting import run_onnx

from graphopt.backends.onnx import to_onnx
from graphopt.backends.torch_export import to_exported_program
from graphopt.frontends.torch_export import from_exported_program
from graphopt.fused.group_norm_act.spec import group_norm_reference
from graphopt.ir import DType, Graph, Op, Tensor

RNG = np.random.default_rng(0)
SCALE = (1 + 0.3 * RNG.standard_normal(6)).astype(np.float32)
BIAS = (0.3 * RNG.standard_normal(6)).astype(np.float32)


def group_norm_graph(shape, opset=18, affine=True) -> Graph:
    graph = Graph()
    x = graph.add_input("x", DType.FLOAT32, shape)
    weights = [graph.add_constant(Tensor.from_array(a), n) for a, n in ((SCALE, "scale"), (BIAS, "bias"))]
    norm = graph.add_node(
        Op.GROUP_NORM, [x, *(weights if affine else (None, None))], {"groups": 3, "eps": 1e-5}
    )
    graph.set_outputs([norm.output])
    graph.meta["opset"] = {"": opset}
    return graph


@pytest.mark.parametrize("opset", [13, 18, 21])
@pytest.mark.parametrize(
    ("shape", "affine"), [((2, 6, 4, 5), True), ((3, 6), False), ((1, 6, 2, 2, 3), True)]
)
def test_onnx_writes_the_exporters_spelling(shape, affine, opset):
    model = to_onnx(group_norm_graph(shape, opset, affine))
    assert "InstanceNormalization" in [n.op_type for n in model.graph.node]
    x = RNG.standard_normal(shape).astype(np.float32)
    (y,) = run_onnx(model, {"x": x})
    expected = group_norm_reference(x, 3, SCALE if affine else None, BIAS if affine else None, 1e-5)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_torch_writes_aten_group_norm():
    module = torch.nn.GroupNorm(3, 6).eval()
    with torch.no_grad():
        module.weight.copy_(torch.from_numpy(SCALE))
        module.bias.copy_(torch.from_numpy(BIAS))
    x = torch.from_numpy(RNG.standard_normal((2, 6, 4, 5)).astype(np.float32))
    graph = from_exported_program(torch.export.export(module, (x,)))
    (loaded,) = [n for n in graph if n.op == Op.GROUP_NORM]
    made = graph.add_node(Op.GROUP_NORM, list(loaded.inputs), dict(loaded.attrs), name="made")
    graph.replace_all_uses(loaded.output, made.output)
    graph.erase(loaded)
    graph.sort()
    program = to_exported_program(graph)
    assert "aten.group_norm.default" in [
        str(n.target) for n in program.graph.nodes if n.op == "call_function"
    ]
    expected = group_norm_reference(x.numpy(), 3, SCALE, BIAS, 1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(program.module()(x).numpy(), expected, rtol=1e-5, atol=1e-5)
