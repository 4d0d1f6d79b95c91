"""A plain graph is drawn whole (parallel copies folded), or the picture says what it left out; the
legend lists only the colours the picture uses."""

from pathlib import Path

import onnx
import pytest
from onnx import helper
from test_show import ENGINES, svg_texts

import graphopt
from graphopt.picture import render

SEED_MODEL = Path(__file__).resolve().parents[2] / "models" / "split_stack.onnx"
COLOURS = ("red:", "green:", "blue:", "white, dashed:", "light grey, dashed:", "grey: graph inputs")


def legend_colours(texts: str) -> set[str]:
    return {colour for colour in COLOURS if colour in texts}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_seed_model_is_drawn_whole(engine, tmp_path):
    target = tmp_path / "seed.svg"
    render(SEED_MODEL, target, engine=engine)
    texts = svg_texts(target)
    for op in ("Split", "Reshape", "LayerNorm", "Tanh", "Unsqueeze", "Concat", "MatMul", "Add", "ReLU"):
        assert op in texts, op
    assert "14 more LayerNorm" in texts
    assert legend_colours(texts) == {"light grey, dashed:", "grey: graph inputs"}


@pytest.mark.parametrize("engine", ENGINES)
def test_an_optimized_model_legend_names_the_fused_op_colour(engine, tmp_path):
    optimized = tmp_path / "seed.opt.onnx"
    graphopt.optimize(SEED_MODEL, output=optimized, verify=False)
    target = tmp_path / "opt.svg"
    render(optimized, target, engine=engine)
    assert legend_colours(svg_texts(target)) == {"green:", "grey: graph inputs"}


@pytest.mark.parametrize("engine", ENGINES)
def test_what_is_left_out_is_said(engine, tmp_path):
    """70 different steps in a row: nothing folds, so past --max-nodes the picture names what it left."""
    ops = ["Tanh", "Sigmoid", "Relu", "Abs", "Neg", "Exp", "Sqrt"] * 10
    nodes = [helper.make_node(op, [f"v{i}"], [f"v{i + 1}"]) for i, op in enumerate(ops)]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("v0", onnx.TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(f"v{len(ops)}", onnx.TensorProto.FLOAT, [4])],
    )
    model = tmp_path / "chain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), model)
    target = tmp_path / "chain.svg"
    render(model, target, engine=engine)
    texts = svg_texts(target)
    assert "the first 60 nodes in order are drawn, the last 10 are not" in texts
    assert "(Abs, Exp, Neg, ReLU, Sigmoid, Sqrt, Tanh): raise --max-nodes" in texts
    render(model, target, engine=engine, max_nodes=70)
    assert "are not" not in svg_texts(target)
