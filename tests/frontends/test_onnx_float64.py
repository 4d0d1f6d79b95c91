import numpy as np
from onnx import TensorProto, helper, numpy_helper

from graphopt.frontends.onnx_float64 import float64_outputs
from graphopt.verification.stored_rounding import EXACT, MODES, STORED


def _sum_then_square(elem=TensorProto.FLOAT16):
    """y = (x + r)^2 with x + r stored in ``elem`` (the rounding that ONNX semantics make)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "r"], ["s"]), helper.make_node("Mul", ["s", "s"], ["y"])],
        "sum",
        [helper.make_tensor_value_info("x", elem, [4])],
        [helper.make_tensor_value_info("y", elem, [4])],
        [numpy_helper.from_array(np.full(4, 0.3, np.float16), "r")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def test_each_value_is_stored_in_its_declared_type_or_not_at_all():
    x = np.full(4, 100.0, np.float16)
    [runs] = float64_outputs(_sum_then_square(), [{"x": x}], None)
    assert set(runs) == set(MODES)
    r = float(np.float16(0.3))
    np.testing.assert_array_equal(runs[EXACT][0], np.full(4, (100.0 + r) ** 2))
    stored = float(np.float16(np.float16(100.0 + r) ** 2))  # (100.3125 squared, rounded)
    np.testing.assert_array_equal(runs[STORED][0], np.full(4, stored))
    assert runs[STORED][0].dtype == np.float64
    for mode in MODES[2:]:  # (noise of up to one unit roundoff before each rounding)
        assert np.all(np.abs(runs[mode][0] - stored) <= 2 * 2.0**-10 * stored)


def test_a_model_with_a_subgraph_has_no_float64_evaluation():
    model = _sum_then_square()
    branch = helper.make_graph([], "b", [], [helper.make_tensor_value_info("s", TensorProto.FLOAT16, [4])])
    model.graph.node[1].CopyFrom(helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch))
    model.graph.input.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    assert float64_outputs(model, [{"x": np.zeros(4, np.float16), "c": np.array(True)}], None) is None


def test_gather_elements_with_indices_smaller_than_the_data_on_another_axis():
    """BERT-like exports gather from a [1, max_positions] buffer with [1, tokens] indices; ONNX's
    reference GatherElements fails wherever indices are smaller than the data on a non-gathered axis,
    which left those models without a float64 evaluation."""
    data = np.arange(24, dtype=np.float32).reshape(3, 8) / 3
    indices = np.array([[0, 7, -1, 2], [5, 5, -8, 1]], np.int64)
    graph = helper.make_graph(
        [helper.make_node("GatherElements", ["data", "indices"], ["y"], axis=1)],
        "gather",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(indices, "indices")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    [runs] = float64_outputs(model, [{"data": data}], None, modes=(EXACT,))
    expected = [
        [data[0, 0], data[0, 7], data[0, 7], data[0, 2]],
        [data[1, 5], data[1, 5], data[1, 0], data[1, 1]],
    ]
    np.testing.assert_array_equal(runs[EXACT][0], np.array(expected, np.float64))


def test_constants_get_no_rounding_noise():
    """Two equal constants stay equal in every mode (their difference 0, as in every computation of
    the model): a constant is made, not computed, and no kernel rounds it."""
    three = numpy_helper.from_array(np.full(16, 3.1, np.float32))
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["a"], value=three),
            helper.make_node("Constant", [], ["b"], value=three),
            helper.make_node("Sub", ["a", "b"], ["d"]),
            helper.make_node("Add", ["x", "d"], ["y"]),
        ],
        "constants",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    x = np.zeros(16, np.float32)
    [runs] = float64_outputs(model, [{"x": x}], None)
    for mode in MODES:
        np.testing.assert_array_equal(runs[mode][0], np.zeros(16), err_msg=f"mode {mode}")
