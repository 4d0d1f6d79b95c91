"""An absent Scale or Bias of a norm's fallback body is a constant where X's normalized shape is known
(``Variant.trailing``): ONNX Runtime folds it like a weight. Built from X's shape instead, it is rebuilt
at every call (a Shape of a value with a symbolic batch is not folded), which made an MLP of fresh
LayerNorms 1.17x slower than the original in a runtime without graphopt's library."""

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from fused_checks import assert_close
from onnx import TensorProto, helper

from graphopt.errors import BadInput
from graphopt.fused import DOMAIN, DOMAIN_VERSION, NORM_ACT
from graphopt.fused.onnx_functions import MAX_FILL_ELEMENTS, attach_functions
from graphopt.fused.onnx_own_functions import check_own_functions


def model_of(node, x_shape, elem_type=TensorProto.FLOAT, inits=()) -> onnx.ModelProto:
    """``node`` from graph input X (``x_shape``: dims or names; None: no shape) to an Abs, the graph's
    output (ONNX Runtime fuses nothing whose output is the graph's)."""
    x = helper.make_tensor_value_info("X", elem_type, x_shape)
    z = helper.make_tensor_value_info("Z", elem_type, None)
    graph = helper.make_graph([node, helper.make_node("Abs", ["Y"], ["Z"])], "fill", [x], [z], list(inits))
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    attach_functions(model)
    return model


def norm_act(inputs=("X", "", ""), axis=-1):
    return helper.make_node(
        "NormAct", list(inputs), ["Y"], domain=DOMAIN, norm="layer", activation="gelu", axis=axis
    )


def fills(model: onnx.ModelProto) -> list[np.ndarray]:
    """The body's constant tensors (GELU's constants are scalars given as value_float)."""
    (function,) = model.functions
    constants = [n for n in function.node if n.op_type == "Constant"]
    return [onnx.numpy_helper.to_array(a.t) for n in constants for a in n.attribute if a.name == "value"]


def body_ops(model: onnx.ModelProto) -> collections.Counter:
    (function,) = model.functions
    return collections.Counter(n.op_type for n in function.node)


def runtime_ops(model: onnx.ModelProto, tmp_path) -> collections.Counter:
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return collections.Counter(n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node)


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"X": x})[0]


def reference(x: np.ndarray, axis=-1) -> np.ndarray:
    y, _ = NORM_ACT.reference(x, norm="layer", activation="gelu", epsilon=1e-5, axis=axis)
    return np.abs(y)


def adversarial(shape, dtype) -> np.ndarray:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape) * 3.0
    x[0] += 1e3  # a large common offset
    return x.astype(dtype)


@pytest.mark.parametrize(
    ("elem_type", "dtype", "x_shape"),
    [(TensorProto.FLOAT, np.float32, ["batch", 8, 16]), (TensorProto.FLOAT16, np.float16, [3, "seq", 16])],
)
def test_an_absent_scale_and_bias_of_a_known_width_are_constants_the_runtime_folds(
    elem_type, dtype, x_shape, tmp_path
):
    model = model_of(norm_act(), x_shape, elem_type)

    ops, overload = body_ops(model), model.graph.node[0].overload
    assert not ops["Shape"] and not ops["ConstantOfShape"], ops
    assert overload.endswith(f"_fill16_{np.dtype(dtype).name}"), overload
    assert sorted(f.tolist() for f in fills(model)) == [[0.0] * 16, [1.0] * 16]
    assert all(f.dtype == dtype for f in fills(model))  # (in X's type: the body normalizes in it)
    ran = runtime_ops(model, tmp_path)
    assert ran["LayerNormalization"] == 1 and not ran["Shape"] and not ran["ConstantOfShape"], ran
    x = adversarial((3, 8, 16), dtype)
    assert_close(run(model, x), reference(x.astype(np.float64)), np.dtype(dtype).name)


def test_an_unknown_width_still_builds_the_fill_from_x(tmp_path):
    model = model_of(norm_act(), None)

    ops = body_ops(model)
    assert ops["Shape"] == 2 and ops["ConstantOfShape"] == 2, ops
    assert "fill" not in model.graph.node[0].overload
    x = adversarial((2, 5, 16), np.float32)
    assert_close(run(model, x), reference(x.astype(np.float64)), "float32")


def test_a_fill_too_large_for_a_constant_is_built_from_x():
    side = int(MAX_FILL_ELEMENTS**0.5) + 1  # (side * side values: just over the limit)
    model = model_of(norm_act(axis=-2), ["batch", side, side])

    assert body_ops(model)["ConstantOfShape"] == 2


def test_a_given_scale_and_bias_need_no_fill():
    rng = np.random.default_rng(0)
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), n) for n in ("S", "B")]
    model = model_of(norm_act(("X", "S", "B")), ["batch", 16], inits=inits)

    assert not fills(model) and not body_ops(model)["Shape"]
    assert "fill" not in model.graph.node[0].overload


def test_nodes_of_other_widths_get_functions_of_their_own():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 16])
    w = helper.make_tensor_value_info("W", TensorProto.FLOAT, ["batch", 32])
    nodes = [norm_act(), helper.make_node("Concat", ["Y", "Y"], ["W"], axis=-1),
             helper.make_node("NormAct", ["W", "", ""], ["Z"], domain=DOMAIN, norm="layer")]  # fmt: skip
    z = helper.make_tensor_value_info("Z", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "two", [x], [z], value_info=[w])
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    attach_functions(model)

    assert sorted(f.overload.split("_")[-2] for f in model.functions) == ["fill16", "fill32"]
    x = adversarial((4, 16), np.float32)
    y, _ = NORM_ACT.reference(x.astype(np.float64), norm="layer", activation="gelu", epsilon=1e-5, axis=-1)
    z, _ = NORM_ACT.reference(np.concatenate([y, y], axis=-1), norm="layer", activation="identity",
                              epsilon=1e-5, axis=-1)  # fmt: skip
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert_close(session.run(None, {"X": x})[0], z, "float32")


def test_a_model_graphopt_wrote_with_fills_reads_back_and_a_changed_fill_is_refused():
    """Reading a model back, its graphopt functions must be the ones graphopt builds (the domain is
    graphopt's own): a fill is rebuilt from the overload's name and compared whole."""
    model = model_of(norm_act(), ["batch", 8, 16])
    check_own_functions(model, "written")  # (graphopt's own output: no error)

    (function,) = model.functions
    for node in function.node:
        for attr in node.attribute:
            if node.op_type == "Constant" and attr.name == "value" and attr.t.dims:
                array = onnx.numpy_helper.to_array(attr.t)
                attr.t.CopyFrom(
                    onnx.numpy_helper.from_array(np.where(array == 1.0, 2.0, array).astype(array.dtype))
                )
    with pytest.raises(BadInput, match="not graphopt's NormAct"):
        check_own_functions(model, "changed")
