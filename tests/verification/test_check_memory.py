"""The numeric check's random inputs that do not fit in memory are bad input, not an internal error."""

import onnx
import pytest
from onnx import TensorProto, helper

import graphopt
from graphopt.errors import BadInput
from graphopt.ir import DType
from graphopt.verification import checking, draws

SEED_MODEL = "models/split_stack.onnx"


def test_inputs_too_large_for_memory_are_bad_input(monkeypatch, tmp_path):
    def no_memory(specs, seed=0):
        raise MemoryError("Unable to allocate 1.86 GiB")

    monkeypatch.setattr(checking, "random_draws", no_memory)
    output = tmp_path / "out.onnx"
    with pytest.raises(BadInput, match=r"do not fit in memory \(input_data: .*--input-shape.*--no-verify"):
        graphopt.optimize(SEED_MODEL, output=output)
    assert not output.exists()
    optimized, report = graphopt.optimize(SEED_MODEL, verify=False)
    assert report.verification is None
    assert [node.op_type for node in optimized.graph.node] == ["Reshape", "NormActLinear"]


def _wide_input_model(width: int, elem=TensorProto.FLOAT16) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "wide",
        [helper.make_tensor_value_info("x", elem, [1, width])],
        [helper.make_tensor_value_info("y", elem, [1, width])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_inputs_whose_draws_exceed_the_budget_are_refused_before_any_allocation(monkeypatch):
    """An fp16 input of 10^9 elements is 2 GB, under the 2 GiB of one draw, but the check's three
    draws and the float64 array each is drawn from take 14 GB: drawing them took 80 s before the
    allocation failed (a damaged file, the loader fuzzing's case 7987, past its time limit)."""

    def allocates(*args, **kwargs):
        raise AssertionError("the check drew inputs it has no room for")

    monkeypatch.setattr(draws, "random_inputs", allocates)
    expected = r"would take 13\.0 GiB \(x: FLOAT16\[1, 1000000000\]; at most 4 GiB\)"
    with pytest.raises(BadInput, match=expected):
        graphopt.optimize(_wide_input_model(10**9))
    assert draws.draws_bytes({"x": (DType.FLOAT16, (1, 10**9))}) == 3 * 2 * 10**9 + 8 * 10**9


def test_draws_bytes_counts_every_draw_and_one_float64_array():
    specs = {"x": (DType.FLOAT32, (4, 8)), "h": (DType.FLOAT16, (2, 2)), "i": (DType.INT64, (3,))}
    made = draws.random_draws(specs)
    assert len(made) == 4
    held = sum(a.nbytes for d in made for a in d.feeds.values())
    assert draws.draws_bytes(specs) == held + 8 * 32
    assert draws.draws_bytes({"i": (DType.INT64, (3,))}) == 24
    assert draws.draws_bytes({"h": (DType.FLOAT16, (2, 2))}) == 3 * 8 + 8 * 4  # (no offset draw in fp16)
