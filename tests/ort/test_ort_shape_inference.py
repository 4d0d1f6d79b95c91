"""ORT learns the fused outputs' types and shapes from the library, also for values nobody typed."""

import pytest
from onnx import TensorProto, helper

from graphopt.fused import DOMAIN, DOMAIN_VERSION
from graphopt.ort import create_session

pytestmark = pytest.mark.usefixtures("library")


def session_outputs(fused_node, inputs, elem=TensorProto.FLOAT):
    """The session's view of Identity(each fused output): untyped in the model, so ORT must infer."""
    finals = [f"{o}_out" for o in fused_node.output if o]
    nodes = [fused_node] + [helper.make_node("Identity", [o], [f"{o}_out"]) for o in fused_node.output if o]
    graph = helper.make_graph(
        nodes,
        "shape_inference",
        [helper.make_tensor_value_info(name, elem, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info(name, elem, None) for name in finals],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)],
        ir_version=10,
    )
    session = create_session(model, providers=["CPUExecutionProvider"])
    return [(o.type, o.shape) for o in session.get_outputs()]


def test_norm_act_keeps_symbolic_shape():
    node = helper.make_node("NormAct", ["X", "S"], ["Y"], domain=DOMAIN)
    assert session_outputs(node, {"X": ["batch", 7, 16], "S": [16]}) == [("tensor(float)", ["batch", 7, 16])]


def test_norm_act_with_absent_middle_input_and_residual_sum():
    node = helper.make_node("NormAct", ["X", "S", "", "R"], ["Y", "RS"], domain=DOMAIN, norm="rms")
    outputs = session_outputs(node, {"X": ["n", 8], "S": [8], "R": ["n", 8]}, TensorProto.FLOAT16)
    assert outputs[0] == ("tensor(float16)", ["n", 8])
    assert outputs[1][0] == "tensor(float16)"  # ResidualSum: typed by ORT, shape left to run time


def test_norm_act_linear_output_shape():
    node = helper.make_node("NormActLinear", ["X", "", "", "W"], ["Y"], domain=DOMAIN)
    outputs = session_outputs(node, {"X": ["b", "s", 32], "W": [5, 32]}, TensorProto.BFLOAT16)
    assert outputs == [("tensor(bfloat16)", ["b", "s", 5])]


def test_norm_act_linear_symbolic_out_features():
    node = helper.make_node("NormActLinear", ["X", "SC", "B", "W", "LB"], ["Y"], domain=DOMAIN)
    inputs = {"X": [4, 32], "SC": [32], "B": [32], "W": ["k", 32], "LB": ["k"]}
    assert session_outputs(node, inputs) == [("tensor(float)", [4, "k"])]
