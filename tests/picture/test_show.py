import os
import xml.etree.ElementTree as ET

import onnx
import pytest
import torch
from exporting import export_onnx
from typer.testing import CliRunner

import graphopt
from graphopt.cli import app
from graphopt.picture import render
from graphopt.picture.draw_dot import available as dot_available
from graphopt.picture.draw_mpl import available as matplotlib_available

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# CI installs Graphviz: there a missing dot fails these tests instead of skipping them.
NO_DOT = not dot_available() and os.environ.get("CI") != "true"
ENGINES = [
    pytest.param("graphviz", marks=pytest.mark.skipif(NO_DOT, reason="Graphviz's dot is not installed")),
    pytest.param("matplotlib", marks=pytest.mark.skipif(not matplotlib_available(), reason="no matplotlib")),
]


class Block(torch.nn.Module):
    """Residual add → LayerNorm → GELU, repeated: each layer fuses into one NormAct."""

    def __init__(self, layers=1, d=16):
        super().__init__()
        self.linears = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(layers))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(layers))

    def forward(self, x):
        for linear, norm in zip(self.linears, self.norms, strict=True):
            x = torch.nn.functional.gelu(norm(x + linear(x)))
        return x


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("small")
    model = export_onnx(Block(), (torch.randn(2, 16),), "dynamo")
    onnx.save(model, folder / "block.onnx")
    graphopt.optimize(folder / "block.onnx", output=folder / "block.opt.onnx")
    return folder


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    folder = tmp_path_factory.mktemp("large")
    model = export_onnx(Block(layers=12), (torch.randn(2, 16),), "dynamo")
    onnx.save(model, folder / "deep.onnx")
    graphopt.optimize(folder / "deep.onnx", output=folder / "deep.opt.onnx")
    return folder


def svg_texts(path):
    root = ET.parse(path).getroot()  # raises on a malformed file
    assert root.tag.endswith("svg")
    return " ".join(t for element in root.iter() for t in (element.text or "",) if t.strip())


def box_count(path, title):
    return svg_texts(path).count(title)


@pytest.mark.parametrize("engine", ENGINES)
def test_before_and_after_picture_names_the_fused_op(small, engine):
    target = small / f"picture.{engine}.svg"
    drawn = render(small / "block.onnx", target, optimized=small / "block.opt.onnx", engine=engine)
    texts = svg_texts(target)
    assert "NormAct" in texts and "LayerNorm" in texts and "before" in texts and "after" in texts
    assert drawn.rows == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_png_is_written(small, engine):
    target = small / f"picture.{engine}.png"
    render(small / "block.onnx", target, optimize=True, engine=engine)
    assert target.read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("engine", ENGINES)
def test_large_graph_is_cropped_to_one_row_per_kind_of_region(large, engine):
    target = large / f"deep.{engine}.svg"
    drawn = render(
        large / "deep.onnx", target, optimized=large / "deep.opt.onnx", engine=engine, max_nodes=20
    )
    texts = svg_texts(target)
    assert drawn.rows == 1  # twelve layers, one kind of fusion
    assert "NormAct" in texts
    # The region and its neighbours, not the 12 layers: at most a few LayerNorm boxes are drawn.
    assert box_count(target, "LayerNorm") <= 3


def test_single_graph_highlights_its_fused_ops(small):
    target = small / "optimized_only.svg"
    render(small / "block.opt.onnx", target, engine="matplotlib" if not dot_available() else "auto")
    assert "NormAct" in svg_texts(target)


def test_cli_show_writes_a_picture(small):
    target = small / "cli.svg"
    result = CliRunner().invoke(
        app,
        ["show", str(small / "block.onnx"), "--optimized", str(small / "block.opt.onnx"), "-o", str(target)],
    )
    assert result.exit_code == 0, result.output
    assert "NormAct" in svg_texts(target)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["-o", "picture.gif"], "expected a .svg or .png file"),
        (["-o", "picture.svg", "--engine", "crayon"], "unknown engine 'crayon'"),
        (["-o", "picture.svg", "--optimize", "--optimized", "x.onnx"], "not both"),
    ],
)
def test_cli_show_rejects_bad_arguments(small, arguments, message, monkeypatch):
    monkeypatch.chdir(small)
    result = CliRunner().invoke(app, ["show", "block.onnx", *arguments])
    assert result.exit_code == 2
    assert message in result.output
