"""Text from a hostile model, on the way out: node and value names with terminal escape sequences,
rich markup, line breaks and control characters reach the terminal, the benchmark's files and the
pictures as printable text (graphopt.printable); a `$` is no formula; bench files replace a link at
their name instead of writing through it; a graph name that is not UTF-8 is bad input."""

import xml.etree.ElementTree as ElementTree

import numpy as np
import onnx
import pytest
from cli_run import assert_bad_input, graphopt
from onnx import TensorProto, helper, numpy_helper

from graphopt.picture import draw_dot
from graphopt.printable import printable, rich_text

HOSTILE = "n\x1b]0;pwned\x07\x1b[2J[link=http://evil.example]click[/link]\r\nLINE2\x00\x9b\u202e"


def test_printable_shows_control_characters_as_escapes_and_keeps_the_rest():
    shown = printable(HOSTILE)
    assert shown == (
        "n\\x1b]0;pwned\\x07\\x1b[2J[link=http://evil.example]click[/link]\\x0d\\x0aLINE2\\x00\\x9b\\u202e"
    )
    assert printable("LayerNorm → GELU, 16 µs, 名前") == "LayerNorm → GELU, 16 µs, 名前"
    assert printable("x" * 10, limit=4) == "xxx…"
    assert rich_text("[bold]x[/bold]") == "\\[bold]x\\[/bold]"


def _norm_tanh(name: str, path, value: str = "y", graph_name: str = "g") -> str:
    """LayerNorm → Tanh whose norm output is also a graph output (a near miss that names the Tanh)."""
    nodes = [
        helper.make_node("LayerNormalization", ["x", "s"], ["n"], axis=-1),
        helper.make_node("Tanh", ["n"], [value], name=name),
    ]
    graph = helper.make_graph(
        nodes, graph_name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info(value, TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("n", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(np.ones(8, np.float32), "s")],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return str(path)


def test_the_report_shows_a_hostile_node_name_as_text(tmp_path):
    model = _norm_tanh(HOSTILE, tmp_path / "m.onnx")

    result = graphopt("optimize", model, "-o", tmp_path / "out.onnx")

    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\r" not in result.stdout and "\x00" not in result.stdout
    assert "\\x1b]0;pwned" in result.stdout  # (the name is there, as text)
    assert not any(line.startswith("LINE2") for line in result.stdout.splitlines())


def test_an_error_quoting_a_hostile_op_type_is_one_printable_line(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Bogus\x1b]0;pwned\x07\nforged", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )  # fmt: skip
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)

    result = graphopt("optimize", path, "-o", tmp_path / "out.onnx")

    assert_bad_input(result, "Bogus\\x1b]0;pwned\\x07")  # (the message's first line: no "forged" line)
    assert "\x1b" not in result.stderr


ENGINES = ["matplotlib"] + (["graphviz"] if draw_dot.available() else [])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", [HOSTILE, "X$\\frac{1}{$", "a&#xD800;b", "v" * 100_000])
def test_a_picture_of_hostile_names_is_well_formed_svg(engine, name, tmp_path):
    model = _norm_tanh("t", tmp_path / "m.onnx", value=name)
    picture = tmp_path / "m.svg"

    result = graphopt("show", model, "--optimize", "-o", picture, "--engine", engine)

    assert result.returncode == 0, result.stderr
    text = picture.read_bytes()
    ElementTree.fromstring(text)  # (well-formed XML: raises otherwise)
    assert b"\x1b" not in text and b"<script" not in text


def test_bench_writes_names_as_text_and_replaces_a_link_at_its_file(tmp_path):
    model = _norm_tanh("t", tmp_path / "m.onnx", value="y")
    onnx_model = onnx.load(model)
    onnx_model.graph.input[0].name = "x\r\nFORGED"
    for node in onnx_model.graph.node:
        node.input[:] = ["x\r\nFORGED" if i == "x" else i for i in node.input]
    onnx.save(onnx_model, model)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / "bench_m_cpu.json").symlink_to(victim)

    result = graphopt("bench", model, "--out", out, "--device", "cpu", "--iters", "3", "--no-compile")

    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "keep me" and not (out / "bench_m_cpu.json").is_symlink()
    first = (out / "bench_m_cpu.txt").read_text().splitlines()[0]
    assert "x\\x0d\\x0aFORGED" in first and "\r" not in result.stdout
    assert not any(line.startswith("FORGED") for line in result.stdout.splitlines())


def test_a_graph_name_that_is_not_utf8_is_bad_input(tmp_path):
    data = onnx.load(_norm_tanh("t", tmp_path / "m.onnx", graph_name="QQ\u00e9Q")).SerializeToString()
    path = tmp_path / "bad.onnx"
    path.write_bytes(data.replace(b"QQ\xc3\xa9Q", b"QQ\xff\xfeQ"))

    result = graphopt("optimize", path, "-o", tmp_path / "out.onnx")

    assert_bad_input(result, "the graph's name is not UTF-8 text")
    assert not (tmp_path / "out.onnx").exists()
