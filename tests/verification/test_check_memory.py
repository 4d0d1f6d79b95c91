"""The numeric check's random inputs that do not fit in memory are bad input, not an internal error."""

import pytest

import graphopt
from graphopt.errors import BadInput
from graphopt.verification import checking

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
