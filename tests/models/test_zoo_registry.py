from collections import Counter

import pytest

from models import zoo


def test_names_are_unique_and_follow_model_dot_source():
    names = zoo.names()
    assert len(names) == len(set(names))
    sources = {"dynamo", "torchscript", "helper", "export", "export_decomposed"}
    assert all(name.split(".")[1].split("_opset")[0] in sources for name in names)


def test_both_onnx_exporters_are_well_represented():
    sources = Counter(next(iter(e.tags & {"dynamo", "torchscript", "helper"})) for e in zoo.onnx_models())
    assert sources["dynamo"] >= 15
    assert sources["torchscript"] >= 15
    assert sources["helper"] >= 10


def test_every_export_has_a_decomposed_twin():
    exported = {e.name.split(".")[0] for e in zoo.with_tags("aten_export")}
    decomposed = {e.name.split(".")[0] for e in zoo.with_tags("aten_decomposed")}
    assert exported == decomposed
    assert len(exported) >= 10


@pytest.mark.parametrize(
    "tags",
    [
        ("mlp",),
        ("conv", "batch_norm"),
        ("transformer",),
        ("attention",),
        ("layer_norm", "gelu"),
        ("layer_norm", "tanh"),
        ("seed", "split", "stack"),
        ("split", "concat"),
        ("gather",),
        ("dynamic",),
        ("if",),
        ("loop",),
        ("scan",),
        ("outer_scope",),
        ("function",),
        ("metadata",),
        ("doc_string",),
        ("value_info",),
        ("multi_output",),
        ("initializer_input",),
        ("external_data",),
        ("custom_domain",),
    ],
)
def test_onnx_zoo_covers(tags):
    assert zoo.with_tags(*tags, kind="onnx")


@pytest.mark.parametrize(
    "tags",
    [("mlp",), ("conv", "batch_norm"), ("transformer",), ("buffers",), ("dynamic",), ("seed", "split")],
)
def test_export_zoo_covers(tags):
    assert zoo.with_tags(*tags, kind="torch_export")


def test_exporter_control_flow_lands_in_the_matching_path():
    assert zoo.get("cond.dynamo").tags >= {"if", "dynamo"}
    assert zoo.get("repeat_loop.torchscript").tags >= {"loop", "torchscript"}


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(KeyError, match=r"split_stack\.dynamo"):
        zoo.get("no_such_model.dynamo")


def test_build_is_cached_and_hands_out_independent_copies():
    entry = zoo.get("metadata_and_docs.helper")
    first = entry.build()
    first.graph.node.pop()
    assert len(entry.build().graph.node) == 2
