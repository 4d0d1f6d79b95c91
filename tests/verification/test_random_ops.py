"""A model that draws random values (dropout in training mode, random ops without a seed) has no outputs
an optimized model could match: the numeric check refuses it up front, naming the op and what to do,
instead of reporting a mismatch that changes from one try to the next (and blaming a rewrite)."""

import numpy as np
import onnx
import pytest
import torch
from cli_run import assert_bad_input
from cli_run import graphopt as run_graphopt
from onnx import TensorProto, helper

import graphopt
from graphopt.errors import BadInput


class Dropout(torch.nn.Module):
    def __init__(self, training: bool):
        super().__init__()
        self.training_dropout = training

    def forward(self, x):
        return torch.nn.functional.dropout(torch.tanh(x) * 2, p=0.5, training=self.training_dropout)


class Noise(torch.nn.Module):
    def forward(self, x):
        return x + torch.randn_like(x)


def _program(module):
    return torch.export.export(module, (torch.randn(4, 16),))


@pytest.mark.parametrize(
    ("module", "op"),
    [(Dropout(True), "aten.dropout"), (Noise(), "aten.randn_like")],
    ids=["dropout", "noise"],
)
def test_a_torch_program_that_draws_random_values_is_refused_by_the_check(module, op):
    with pytest.raises(BadInput, match="draws random values") as caught:
        graphopt.optimize(_program(module))
    assert op in str(caught.value) and "--no-verify" in str(caught.value)
    fix = (
        "export it after model.eval()" if "dropout" in op else "give the model its random values as an input"
    )
    assert fix in str(caught.value)
    optimized, report = graphopt.optimize(_program(module), verify=False)  # (what the message offers)
    assert report.verification is None and optimized is not None


def test_dropout_outside_training_is_checked_as_usual():
    _, report = graphopt.optimize(_program(Dropout(False)))
    assert report.verification["ok"]


def _random_normal_like(**attributes) -> onnx.ModelProto:
    graph = helper.make_graph(
        [
            helper.make_node("Tanh", ["x"], ["t"]),
            helper.make_node("RandomNormalLike", ["t"], ["noise"], **attributes),
            helper.make_node("Add", ["t", "noise"], ["y"]),
        ],
        "noise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def test_an_onnx_random_op_without_a_seed_is_refused_on_the_command_line(tmp_path):
    source, target = tmp_path / "noise.onnx", tmp_path / "out.onnx"
    onnx.save(_random_normal_like(), source)
    assert_bad_input(
        run_graphopt("optimize", source, "-o", target), "RandomNormalLike at node", "--no-verify"
    )
    assert not target.exists()


def test_an_onnx_random_op_with_a_seed_draws_the_same_values_and_is_checked():
    optimized, report = graphopt.optimize(_random_normal_like(seed=3.0))
    assert report.verification["ok"]
    assert [n.op_type for n in optimized.graph.node].count("RandomNormalLike") == 1


def test_dropout_in_an_onnx_model_is_random_only_in_training_mode():
    def dropout(mode: bool | None) -> onnx.ModelProto:
        inputs = ["x", "ratio", "mode"] if mode is not None else ["x"]
        initializers = [helper.make_tensor("ratio", TensorProto.FLOAT, [], [0.5])]
        if mode is not None:
            initializers.append(helper.make_tensor("mode", TensorProto.BOOL, [], [mode]))
        graph = helper.make_graph(
            [helper.make_node("Dropout", inputs, ["y"])],
            "dropout",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
            initializers,
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)

    with pytest.raises(BadInput, match="Dropout at node"):
        graphopt.optimize(dropout(True))
    for mode in (False, None):
        _, report = graphopt.optimize(dropout(mode), inputs={"x": np.ones((4, 16), np.float32)})
        assert report.verification["ok"]
