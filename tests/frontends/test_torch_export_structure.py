"""The canonical view of the seed's split → view → layer_norm → tanh → stack chain is one and the same
whether it came from ONNX (both torch.onnx.export paths), from torch.export, or from torch.export after
run_decompositions()."""

import contextlib
import io
import logging
import warnings

import numpy as np
import onnx
import pytest
import torch
import torch_programs as tp

from graphopt.analysis import format_node, verify
from graphopt.frontends.onnx import from_onnx
from graphopt.frontends.torch_export import from_exported_program
from graphopt.ir import Op
from graphopt.pipeline import run_passes, select_passes

CANONICAL = ["fold_shape_inputs", "normalize_axes", "recognize_linear", "recognize_stack"]
SOURCES = ["onnx_dynamo", "onnx_torchscript", "exported", "decomposed"]


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


def _onnx(dynamo: bool) -> onnx.ModelProto:
    module, inputs = tp.build("split_stack"), tp.SPECS["split_stack"].inputs()
    with _quiet():
        if dynamo:
            return torch.onnx.export(module, inputs, dynamo=True, opset_version=18).model_proto
        buffer = io.BytesIO()
        torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version=17)
    return onnx.load_from_string(buffer.getvalue())


def _canonical_graph(source: str):
    if source.startswith("onnx"):
        graph = from_onnx(_onnx(dynamo=source == "onnx_dynamo"))
    else:
        graph = from_exported_program(tp.program("split_stack", source))
    run_passes(graph, select_passes(only=CANONICAL), check_each=True)
    verify(graph)
    return graph


def _attrs(node) -> tuple:
    kept = []
    for key, value in sorted(node.attrs.items()):
        if key == "eps":
            value = float(np.float32(value))  # the ONNX exporters store epsilon as a float32
        kept.append((key, value))
    return tuple(kept)


def chain_view(graph) -> tuple:
    """split{attrs} → per slice: the ops up to the stack, with attributes and which inputs are present
    → stack{attrs}."""
    (stack,) = graph.nodes_of(Op.STACK)
    (split,) = graph.nodes_of(Op.SPLIT)
    chains = []
    for value in stack.inputs:
        ops = []
        while value.producer is not split:
            node = value.producer
            present = tuple(v is not None for v in node.inputs[1:])
            ops.append((node.op, _attrs(node), present))
            value = node.input(0)
        chains.append((value.index, tuple(reversed(ops))))
    return (_attrs(split), tuple(chains), _attrs(stack))


@pytest.fixture(scope="module")
def views():
    return {source: chain_view(_canonical_graph(source)) for source in SOURCES}


def test_the_chain_reads_as_split_reshape_layer_norm_tanh_stack(views):
    split, chains, stack = views["exported"]
    assert split == (("axis", 0), ("sizes", (24, 24, 24, 24)))
    assert [index for index, _ in chains] == [0, 1, 2, 3]
    for _, ops in chains:
        assert [op for op, _, _ in ops] == [Op.RESHAPE, Op.LAYER_NORM, Op.TANH]
        assert ops[0][1] == (("shape", (3, 8)),)
    assert stack == (("axis", 0),)


@pytest.mark.parametrize("source", [s for s in SOURCES if s != "exported"])
def test_every_source_gives_the_same_canonical_chain(views, source):
    assert views[source] == views["exported"]


def test_both_torch_forms_give_the_same_whole_graph():
    printed = {}
    for form in ("exported", "decomposed"):
        graph = _canonical_graph(form)
        graph.remove_dead()
        printed[form] = [(n.op, _attrs(n)) for n in graph]
    assert printed["exported"] == printed["decomposed"]
    assert [op for op, _ in printed["exported"]][-2:] == [Op.LINEAR, Op.RELU]


def test_the_decomposed_linear_reads_the_parameters_directly():
    graph = _canonical_graph("decomposed")
    (linear,) = graph.nodes_of(Op.LINEAR)
    assert [v.name for v in linear.inputs[1:]] == ["p_linear_weight", "p_linear_bias"]
    assert linear.input(0).producer.op == Op.STACK, format_node(linear)
