"""Hostile model files that carry no pickle: a .pt2 whose size expressions are Python code (torch would
hand them to sympy.sympify, which evaluates them), a .pt2 that inflates far beyond its stored bytes,
and .onnx external data that leads outside the model's folder or names no file at all. Each is refused
with one line and exit code 2 on every command, before anything runs or is read, and nothing is
written."""

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from cli_run import assert_bad_input, graphopt
from onnx import TensorProto, helper, numpy_helper

import graphopt as api
from graphopt.errors import BadInput
from graphopt.frontends import pt2_read
from graphopt.frontends.pt2_expressions import why_not_plain


class Dynamic(torch.nn.Module):
    def forward(self, x, y):
        z = torch.cat([x, y], 0)
        return torch.relu(torch.nn.functional.layer_norm(z, (16,))) * z.shape[0]


def _dynamic_archive(path: Path) -> Path:
    b, c = torch.export.Dim("b", min=2, max=64), torch.export.Dim("c", min=2, max=64)
    program = torch.export.export(
        Dynamic(), (torch.randn(8, 16), torch.randn(6, 16)), dynamic_shapes={"x": {0: b}, "y": {0: c}}
    )
    torch.export.save(program, path)
    return path


def program_entry(archive: Path) -> tuple[str, bytes]:
    """The name and bytes of the archive's program (its ``models/model.json``)."""
    with zipfile.ZipFile(archive) as opened:
        name = next(n for n in opened.namelist() if n.endswith("/models/model.json"))
        return name, opened.read(name)


def _rewrite_models(source: Path, target: Path, change) -> Path:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            data = old.read(info)
            new.writestr(
                info.filename, change(data) if info.filename.endswith("/models/model.json") else data
            )
    return target


def _planted_expression(folder: Path, marker: Path) -> Path:
    """Every size expression of the program replaced by code that creates ``marker``."""
    clean = _dynamic_archive(folder / "clean.pt2")
    payload = f"__import__('builtins').open({str(marker)!r}, 'w')"

    def plant(data: bytes) -> bytes:
        document = json.loads(data)
        stack = [document]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                for key in item:
                    if key == "expr_str":
                        item[key] = payload
                    else:
                        stack.append(item[key])
            elif isinstance(item, list):
                stack.extend(item)
        return json.dumps(document).encode()

    return _rewrite_models(clean, folder / "planted.pt2", plant)


COMMANDS = {
    "optimize": lambda model, folder: ["optimize", model, "-o", folder / "out" / model.name],
    "verify": lambda model, folder: ["verify", model, model],
    "show": lambda model, folder: ["show", model, "-o", folder / "out" / "picture.svg"],
    "bench": lambda model, folder: ["bench", model, "--out", folder / "out"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_size_expression_that_is_code_never_runs(command, tmp_path):
    marker = tmp_path / "marker"
    archive = _planted_expression(tmp_path, marker)

    result = graphopt(*COMMANDS[command](archive, tmp_path))

    assert_bad_input(result, str(archive), "size expression", "would run it as Python code")
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_the_python_api_refuses_it_too_and_an_honest_dynamic_archive_loads(tmp_path):
    marker = tmp_path / "marker"
    with pytest.raises(BadInput, match=r"it calls \"__import__\('builtins'\)\.open\""):
        api.optimize(_planted_expression(tmp_path, marker), verify=False)
    assert not marker.exists()

    _, report = api.optimize(tmp_path / "clean.pt2")  # (its sizes are symbolic: checked, loaded)
    assert report.verification["ok"]


@pytest.mark.parametrize(
    "expression",
    [
        "Symbol('s77', positive=True, integer=True)",
        "Add(Mul(Integer(16), Symbol('s17', positive=True, integer=True)), Integer(-3))",
        "FloorDiv(Symbol('s0', positive=True, integer=True), Integer(2))",
        "Max(Integer(1), CeilToInt(IntTrueDiv(Symbol('u0', integer=True), Integer(4))))",
        "StrictLessThan(Symbol('s0', positive=True, integer=True), IntInfinity())",
        "And(Eq(Symbol('s1', integer=True), Integer(3)), Not(true))",
        "Mul(Rational(1, 2), Float('1.5', precision=53))",
    ],
)
def test_what_torch_export_save_writes_is_a_plain_expression(expression):
    assert why_not_plain(expression) is None


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("__import__('os').system('true')", "it calls"),
        ("Symbol('s0').__class__", "Attribute"),
        ("sympify('1 + 1')", "it calls 'sympify'"),
        ("Symbol(\"x'); __import__('os'); ('\")", "the string"),
        ("Integer(eval)", "the name 'eval'"),
        ("Symbol('s0', **{'integer': True})", "keyword argument None"),
        ("(lambda: 0)()", "it calls"),
        ("[Integer(1)][0]", "a Subscript in it"),
        ("Add(" * 40_000 + ")" * 40_000, "characters long"),
    ],
)
def test_anything_else_is_refused(expression, why):
    assert why in (why_not_plain(expression) or "")


def test_an_entry_that_inflates_like_a_zip_bomb_is_refused_before_it_is_read(tmp_path, monkeypatch):
    clean = _dynamic_archive(tmp_path / "clean.pt2")
    bomb = _rewrite_models(clean, tmp_path / "bomb.pt2", lambda data: data + b" " * (4 << 20))
    monkeypatch.setattr(pt2_read, "BOMB_BYTES", 1 << 20)  # (a real bomb needs no test of its size)

    with pytest.raises(BadInput, match=r"inflates to 0\.0 GiB from 0\.0 MiB \(a zip bomb\?\)"):
        api.optimize(bomb, verify=False)


def _model_with_external_weights(folder: Path, location: str) -> Path:
    """x + w (w: 8 floats kept in ``location``), inside an If's branches: onnx.checker then checks the
    model in memory, not its external files."""
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[8], data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("length", "32")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value

    def branch(tag):
        return helper.make_graph(
            [helper.make_node("Identity", ["w"], [f"o{tag}"])], f"b{tag}", [],
            [helper.make_tensor_value_info(f"o{tag}", TensorProto.FLOAT, [8])], [tensor],
        )  # fmt: skip

    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "z"], ["c"]),
            helper.make_node("If", ["c"], ["y"], then_branch=branch("t"), else_branch=branch("e")),
        ],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])],
        [numpy_helper.from_array(np.array(0, np.float32), "z")],
    )  # fmt: skip
    path = folder / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_external_data_through_a_link_out_of_the_model_folder_is_refused(command, tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"SECRET-BYTES-NOT-FOR-ANY-OUTPUT!")
    (tmp_path / "model").mkdir()
    os.symlink(secret, tmp_path / "model" / "weights.bin")
    model = _model_with_external_weights(tmp_path / "model", "weights.bin")

    result = graphopt(
        *COMMANDS[command](model, tmp_path), *(["--no-verify"] if command == "optimize" else [])
    )

    assert_bad_input(result, "'weights.bin', which leads outside the model's folder")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_external_data_named_with_a_nul_byte_is_bad_input(command, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "w.bin").write_bytes(bytes(32))
    model = _model_with_external_weights(tmp_path / "model", "w.bin\0x")

    result = graphopt(*COMMANDS[command](model, tmp_path))

    assert_bad_input(result, "names external data 'w.bin\\x00x'; expected a file beside the model")
    assert not (tmp_path / "out").exists()


def test_a_size_expression_under_an_escaped_key_is_checked_too(tmp_path):
    # ("expr\u005fstr" is expr_str to torch's JSON reader, but not the bytes the check looked for)
    marker = tmp_path / "marker"
    planted = _planted_expression(tmp_path, marker)
    escaped = _rewrite_models(
        planted, tmp_path / "escaped.pt2", lambda data: data.replace(b'"expr_str"', b'"expr\\u005fstr"')
    )
    with pytest.raises(BadInput, match="size expression"):
        api.optimize(escaped, verify=False)
    assert not marker.exists()


class _Planted:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):  # (what an unpickler would call: never run here)
        return (open, (self.marker, "w"))


def _legacy_archive(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("version", "8.0")
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


def test_the_older_layouts_pickles_under_a_json_name_are_checked(tmp_path):
    import pickle

    marker = tmp_path / "marker"
    archive = _legacy_archive(
        tmp_path / "legacy.pt2",
        {
            "serialized_exported_program.json": b"{}",
            "serialized_state_dict.json": pickle.dumps(_Planted(marker)),
        },
    )
    with pytest.raises(BadInput, match=r"'serialized_state_dict\.json' holds objects"):
        api.optimize(archive, verify=False)
    assert not marker.exists()


def test_the_older_layouts_program_is_checked_whatever_its_keys_spelling(tmp_path):
    document = {"graph_module": {"graph": {"inputs": [{"as_tensor": {"name": "x=__import__('os')"}}]}}}
    text = json.dumps(document).replace('"graph_module"', '"graph\\u005fmodule"')
    assert "graph_module" not in text and "graph_module" in json.loads(text)
    archive = _legacy_archive(tmp_path / "legacy.pt2", {"serialized_exported_program.json": text.encode()})
    with pytest.raises(BadInput, match="not an identifier"):
        api.optimize(archive, verify=False)
