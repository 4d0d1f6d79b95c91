"""The ``graphopt`` domain is graphopt's own: a model whose function in it is not graphopt's is refused
(graphopt would rewrite the node as its fused op, and its check, which runs the library, could not
tell); graphopt's own output, with the fallback functions it writes, optimizes again."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_run import assert_bad_input, graphopt
from onnx import TensorProto, helper, numpy_helper

import graphopt as api
from graphopt.errors import BadInput

D = 16


def _norm_relu(
    opset: int, first: list[onnx.NodeProto] = (), functions=(), source: str = "x"
) -> onnx.ModelProto:
    """[first nodes →] LayerNormalization (from Mean/Sub/... below opset 17) → Relu over D."""
    rng = np.random.default_rng(0)
    scale = numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "s")
    bias = numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "b")
    if opset >= 17:
        norm = [helper.make_node("LayerNormalization", [source, "s", "b"], ["n"], axis=-1)]
    else:
        eps = numpy_helper.from_array(np.array(1e-5, np.float32), "eps")
        norm = [
            helper.make_node("ReduceMean", [source], ["m"], axes=[-1]),
            helper.make_node("Sub", [source, "m"], ["c"]),
            helper.make_node("Mul", ["c", "c"], ["sq"]),
            helper.make_node("ReduceMean", ["sq"], ["v"], axes=[-1]),
            helper.make_node("Add", ["v", "eps"], ["ve"]),
            helper.make_node("Sqrt", ["ve"], ["sd"]),
            helper.make_node("Div", ["c", "sd"], ["z"]),
            helper.make_node("Mul", ["z", "s"], ["zs"]),
            helper.make_node("Add", ["zs", "b"], ["n"]),
        ]
    initializers = [scale, bias] + ([] if opset >= 17 else [eps])
    graph = helper.make_graph(
        [*first, *norm, helper.make_node("Relu", ["n"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, D])], initializer=initializers,
    )  # fmt: skip
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("graphopt", 1)] if functions else [])
    model = helper.make_model(graph, opset_imports=imports, functions=list(functions))
    model.ir_version = 10 if functions else 8
    return model


def _foreign_norm_act() -> onnx.ModelProto:
    """The model calls its own graphopt.NormAct, which negates X, before a LayerNorm → Relu."""
    negate = helper.make_function(
        "graphopt", "NormAct", ["X"], ["Y"], [helper.make_node("Neg", ["X"], ["Y"])],
        opset_imports=[helper.make_opsetid("", 18)],
    )  # fmt: skip
    first = [helper.make_node("NormAct", ["x"], ["x2"], domain="graphopt")]
    return _norm_relu(18, first, functions=[negate], source="x2")


def test_a_model_with_its_own_function_in_graphopts_domain_is_refused():
    model = _foreign_norm_act()
    onnx.checker.check_model(model, full_check=True)  # (a valid model: only graphopt refuses it)

    with pytest.raises(BadInput, match=r"own function graphopt\.NormAct.*reserved for graphopt's fused ops"):
        api.optimize(model)


def test_the_cli_refuses_it_with_one_line_and_writes_nothing(tmp_path):
    source, target = tmp_path / "m.onnx", tmp_path / "m.opt.onnx"
    onnx.save(_foreign_norm_act(), source)

    result = graphopt("optimize", source, "-o", target)

    assert_bad_input(result, "graphopt.NormAct", "rename the function's domain")
    assert not target.exists()


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """On ONNX Runtime's CPU EP without graphopt's library: the fallback functions run."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("opset", [13, 18])
def test_graphopts_own_output_optimizes_again_with_the_same_functions(opset):
    x = np.random.default_rng(1).standard_normal((2, 4, D)).astype(np.float32) * 3 + 7
    once, _ = api.optimize(_norm_relu(opset))
    assert [n.op_type for n in once.graph.node] == ["NormAct"] and len(once.functions) == 1

    twice, report = api.optimize(once)

    assert report.verification["ok"]
    assert [n.op_type for n in twice.graph.node] == ["NormAct"]
    assert [f.SerializeToString() for f in twice.functions] == [f.SerializeToString() for f in once.functions]
    np.testing.assert_allclose(_run(twice, x), _run(_norm_relu(opset), x), rtol=1e-4, atol=1e-4)


def test_a_function_changed_after_graphopt_wrote_it_is_refused():
    once, _ = api.optimize(_norm_relu(18))
    body = once.functions[0]
    relu = next(n for n in body.node if n.op_type == "Relu")
    relu.op_type = "Sigmoid"  # (the node still says relu: the function no longer computes it)

    with pytest.raises(BadInput, match="not graphopt's NormAct for its attributes"):
        api.optimize(once)


def test_a_node_of_graphopts_domain_without_a_function_is_still_read_as_graphopts():
    once, _ = api.optimize(_norm_relu(18))
    del once.functions[:]

    twice, report = api.optimize(once)

    assert report.verification["ok"] and [n.op_type for n in twice.graph.node] == ["NormAct"]
