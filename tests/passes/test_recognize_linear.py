import contextlib
import io
import logging
import warnings

import numpy as np
import onnx
import pytest
import torch
import torch_programs as tp
from graphopt.passes.recognize import recognize_linear
from onnx import TensorProto, helper, numpy_helper

import graphopt
from graphopt.analysis import op_counts, verify
from graphopt.frontends.onnx import from_onnx
from graphopt.frontends.torch_export import from_exported_program
from graphopt.ir import DType, Graph, Op, Tensor

F32 = DType.FLOAT32


def _run(graph: Graph):
    stats = recognize_linear.PASS.run(graph)
    graph.sort()
    verify(graph)
    return stats


def _weight(graph: Graph, shape=(5, 4), dtype=F32, name="w"):
    array = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 10
    return graph.add_constant(Tensor.from_array(array.astype(dtype.numpy), dtype), name)


def _matmul_graph(x_shape=(6, 4), x_dtype=F32, w_dtype=F32, perm=(1, 0), bias=None, extra_reader=False):
    graph = Graph()
    x = graph.add_input("x", x_dtype, x_shape)
    w = _weight(graph, dtype=w_dtype)
    wt = graph.add_node(Op.TRANSPOSE, [w], {"perm": perm}).output
    y = graph.add_node(Op.MATMUL, [x, wt]).output
    if bias is not None:
        y = graph.add_node(Op.ADD, [y, bias(graph)]).output
    outputs = [y]
    if extra_reader:
        outputs.append(graph.add_node(Op.RELU, [wt]).output)
    graph.set_outputs(outputs)
    return graph


def _flattened_graph(x_shape, flat, out):
    graph = Graph()
    x = graph.add_input("x", F32, x_shape)
    flat_x = graph.add_node(Op.RESHAPE, [x], {"shape": flat}).output
    w = _weight(graph, shape=(5, flat[-1]))
    y = graph.add_node(Op.LINEAR, [flat_x, w]).output
    graph.set_outputs([graph.add_node(Op.RESHAPE, [y], {"shape": out}).output])
    return graph


def _vector(size, dtype=F32):
    return lambda graph: graph.add_constant(Tensor.from_array(np.ones(size, dtype.numpy), dtype), "b")


# ----- positive ------------------------------------------------------------------------------------


def test_transposed_matmul_plus_bias_becomes_one_linear():
    graph = _matmul_graph(bias=_vector(5))
    stats = _run(graph)
    assert dict(stats.counts) == {"linear_from_transposed_matmul": 1, "linear_bias": 1}
    assert op_counts(graph) == {Op.LINEAR: 1}
    (linear,) = graph.nodes_of(Op.LINEAR)
    assert [v.name for v in linear.inputs] == ["x", "w", "b"]
    assert linear.meta["rule"] == "linear_bias"


def test_transposed_matmul_without_bias_becomes_linear():
    graph = _matmul_graph()
    _run(graph)
    assert op_counts(graph) == {Op.LINEAR: 1}


def test_decomposed_torch_linears_read_the_parameters_again():
    graph = from_exported_program(tp.program("mlp", "decomposed"))
    stats = _run(graph)
    assert stats.counts["linear_bias"] == 2
    graph.remove_dead()
    assert op_counts(graph) == {Op.LINEAR: 2, Op.RELU: 1}
    assert [n.input(1).name for n in graph.nodes_of(Op.LINEAR)] == ["p_0_weight", "p_2_weight"]


def test_flattening_views_around_a_3d_linear_go_too():
    graph = from_exported_program(tp.program("mlp_ln_gelu", "decomposed"))
    stats = _run(graph)
    assert stats.counts["linear_through_flatten"] == 2
    graph.remove_dead()
    linears = graph.nodes_of(Op.LINEAR)
    assert len(linears) == 2 and all(n.input(0).rank == 3 for n in linears)
    assert Op.RESHAPE not in op_counts(graph)


# ----- negative: one per reason --------------------------------------------------------------------


M, B, F = "linear_from_transposed_matmul", "linear_bias", "linear_through_flatten"
NEAR_MISSES = {
    "rank": (lambda: _matmul_graph(x_shape=None), M, "rank of 'x' is unknown"),
    "dtypes": (lambda: _matmul_graph(x_dtype=DType.FLOAT16), M, "'x' is float16 but the weight 'w'"),
    "shared_transpose": (lambda: _matmul_graph(extra_reader=True), M, "is also read by relu"),
    "bias_size": (lambda: _matmul_graph(bias=_vector(1)), B, "has shape [1], not [5] like a bias of 'w'"),
    "bias_dtype": (lambda: _matmul_graph(bias=_vector(5, DType.FLOAT64)), B, "'b' is float64 but 'x'"),
    "flatten": (lambda: _flattened_graph((2, 3, 4), (3, 8), (15,)), F, "does not flatten the leading dims"),
    "restore": (lambda: _flattened_graph((2, 3, 4), (6, 4), (3, 2, 5)), F, "does not restore the leading"),
    "shapes": (lambda: _flattened_graph(("n", 3, None), (-1, 4), (2, 3, 5)), F, "are not fully known"),
}


@pytest.mark.parametrize("case", NEAR_MISSES, ids=str)
def test_near_misses_name_why(case):
    build, rule, reason = NEAR_MISSES[case]
    stats = _run(build())
    (miss,) = stats.near_misses
    assert miss.rule == rule and reason in miss.reason
    assert rule not in stats.counts


def test_batched_transposes_and_residual_adds_are_not_near_misses():
    graph = _matmul_graph(x_shape=(2, 6, 4), perm=(1, 0))
    residual = graph.add_input("r", F32, (2, 6, 5))
    graph.set_outputs([graph.add_node(Op.ADD, [graph.outputs[0], residual]).output])
    stats = _run(graph)
    assert dict(stats.counts) == {"linear_from_transposed_matmul": 1} and not stats.near_misses
    attention = Graph()
    q, k = attention.add_input("q", F32, (2, 3, 4)), attention.add_input("k", F32, (2, 3, 4))
    kt = attention.add_node(Op.TRANSPOSE, [k], {"perm": (0, 2, 1)}).output
    attention.set_outputs([attention.add_node(Op.MATMUL, [q, kt]).output])
    stats = _run(attention)
    assert not stats.counts and not stats.near_misses


def _onnx_linear(transposed: bool) -> onnx.ModelProto:
    w = np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4)
    nodes = [helper.make_node("MatMul", ["x", "wt"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])]
    weights = [numpy_helper.from_array(np.linspace(0, 1, 5, dtype=np.float32), "b")]
    if transposed:
        nodes.insert(0, helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]))
        weights.append(numpy_helper.from_array(w, "w"))
    else:
        weights.append(numpy_helper.from_array(w.T.copy(), "wt"))
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def test_onnx_matmul_by_a_constant_without_transpose_is_left_alone():
    graph = from_onnx(_onnx_linear(transposed=False))
    stats = _run(graph)
    assert not stats.counts and not stats.near_misses
    assert Op.LINEAR not in op_counts(graph)


# ----- numeric -------------------------------------------------------------------------------------


def test_onnx_transpose_matmul_add_keeps_its_outputs_in_onnx_runtime():
    optimized, report = graphopt.optimize(_onnx_linear(transposed=True), only=["recognize_linear"])
    assert report.verification["ok"], report.verification["summary"]
    assert report.passes[0].counts == {"linear_from_transposed_matmul": 1, "linear_bias": 1}
    assert "Transpose" not in [n.op_type for n in optimized.graph.node]


@pytest.mark.parametrize("name", ["mlp", "mlp_ln_gelu", "mlp_dynamic_batch", "transformer_encoder"])
def test_decomposed_programs_keep_their_outputs(name):
    program = tp.program(name, "decomposed")
    optimized, report = graphopt.optimize(program, only=["recognize_linear"])
    assert report.verification["ok"], report.verification["summary"]
    assert sum(report.passes[0].counts.values()) > 0
    inputs = tp.SPECS[name].inputs(seed=2, batch=5)
    torch.testing.assert_close(tp.outputs(optimized, inputs), tp.outputs(program, inputs))


def test_exporters_linear_in_onnx_is_not_churned():
    module, inputs = tp.build("mlp_ln_gelu"), tp.SPECS["mlp_ln_gelu"].inputs()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        buffer = io.BytesIO()
        torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version=17)
        logging.disable(logging.NOTSET)
    graph = from_onnx(onnx.load_from_string(buffer.getvalue()))
    stats = _run(graph)
    assert not stats.counts and not stats.near_misses
