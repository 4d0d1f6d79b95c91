from collections import Counter

import numpy as np
import onnx
import pytest
import torch

from models import zoo
from models.split_stack import Combined, SplitStack, example_input


@pytest.mark.parametrize("sizes", [(4, 2, 8), (16, 1024, 256)], ids=["small", "seed"])
def test_split_stack_and_combined_agree(sizes):
    x = example_input(*sizes)
    with torch.no_grad():
        torch.testing.assert_close(SplitStack(*sizes)(x), Combined(*sizes)(x), rtol=1e-5, atol=1e-6)


def test_output_shape_is_n_by_b_by_1():
    assert SplitStack(3, 5, 8)(example_input(3, 5, 8)).shape == (3, 5, 1)


def test_weights_depend_only_on_the_seed():
    torch.manual_seed(123)
    a = SplitStack(2, 2, 8, seed=7)
    torch.manual_seed(456)
    b = SplitStack(2, 2, 8, seed=7)
    torch.testing.assert_close(a.linear.weight, b.linear.weight, rtol=0, atol=0)
    assert not torch.equal(a.linear.weight, SplitStack(2, 2, 8, seed=8).linear.weight)


def _ops(model: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in model.graph.node)


def _epsilons(model: onnx.ModelProto) -> list[float]:
    return [
        onnx.helper.get_attribute_value(a)
        for n in model.graph.node
        if n.op_type == "LayerNormalization"
        for a in n.attribute
        if a.name == "epsilon"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["split_stack.dynamo", "split_stack.torchscript"])
def test_both_onnx_exporters_keep_one_chain_per_slice_and_eps_zero(name):
    model = zoo.get(name).build()
    ops = _ops(model)
    assert ops["Split"] == 1
    assert ops["LayerNormalization"] == ops["Tanh"] == ops["Unsqueeze"] == 4
    assert ops["Concat"] == 1
    assert _epsilons(model) == [0.0] * 4


def test_decomposed_layer_norm_adds_an_epsilon_of_zero():
    model = zoo.get("split_stack.torchscript_opset16").build()
    assert "LayerNormalization" not in _ops(model)
    constants = {
        n.output[0]: onnx.numpy_helper.to_array(n.attribute[0].t)
        for n in model.graph.node
        if n.op_type == "Constant"
    }
    sqrt_inputs = {n.input[0] for n in model.graph.node if n.op_type == "Sqrt"}
    eps_adds = [n for n in model.graph.node if n.op_type == "Add" and n.output[0] in sqrt_inputs]
    assert len(eps_adds) == 4
    assert all(float(constants[n.input[1]]) == 0.0 for n in eps_adds)


def test_torch_export_keeps_eps_zero():
    program = zoo.get("split_stack.export").build()
    norms = [n for n in program.graph.nodes if n.target == torch.ops.aten.layer_norm.default]
    assert len(norms) == 4
    assert all(n.args[4] == 0.0 for n in norms)


def test_example_input_is_reproducible():
    np.testing.assert_array_equal(example_input(2, 2, 4).numpy(), example_input(2, 2, 4).numpy())
