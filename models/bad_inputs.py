"""Bad input files for the CLI tests: each kind written into a directory, with what is wrong with it.

    from models import bad_inputs
    for bad in bad_inputs.BAD_INPUTS:          # BadInput(name, filename, description, stage, write)
        path = bad.write(tmp_path)

`stage` says where a reader first notices the problem:
- "unreadable": not a model. `onnx.load` raises, or (protobuf skips what it does not know: an empty file,
  and on some protobuf runtimes a TensorProto) returns a ModelProto with no graph; `torch.export.load` raises;
- "check": `onnx.checker.check_model` rejects it (a cycle and an undefined input both read "must be
  topologically sorted");
- "opset": a valid graph in an opset a tool does not support. The checker accepts both opset 99 and
  opset 6, so a tool has to compare the opset itself.
"""

from __future__ import annotations

import functools
import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from models.onnx_build import FLOAT, IR_VERSION, floats, init, tensor

SEED = 0


@dataclass(frozen=True)
class BadInput:
    name: str
    filename: str
    description: str
    stage: str
    make: Callable[[], bytes] = field(repr=False)

    def write(self, directory: Path) -> Path:
        path = Path(directory) / self.filename
        path.write_bytes(self.make())
        return path


def _graph(nodes, inputs=("x",), outputs=("y",)) -> onnx.GraphProto:
    return helper.make_graph(
        nodes, "bad", [tensor(n, FLOAT, [2, 4]) for n in inputs], [tensor(n, FLOAT, [2, 4]) for n in outputs]
    )


def _model_bytes(graph: onnx.GraphProto, opset: int = 20) -> bytes:
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    built.ir_version = IR_VERSION
    return built.SerializeToString()


@functools.cache
def valid_model_bytes() -> bytes:
    """A small valid model (MatMul with a 64×64 weight, Relu) that the corrupt variants start from."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "valid",
        [tensor("x", FLOAT, [2, 64])],
        [tensor("y", FLOAT, [2, 64])],
        [init("w", floats(64, 64))],
    )
    return _model_bytes(graph)


def _random_bytes() -> bytes:
    # A first byte of 0x07 is field 0 with wire type 7: invalid protobuf, so no parser can accept the file.
    return b"\x07" + np.random.default_rng(SEED).bytes(255)


def _truncated_model() -> bytes:
    data = valid_model_bytes()
    # Cutting inside the weight's raw data (the bulk of the file) leaves a length-delimited field unfinished.
    return data[: len(data) // 2]


def _tensor_not_model() -> bytes:
    return numpy_helper.from_array(floats(4, 4), "weights").SerializeToString()


def _cycle() -> bytes:
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("Identity", ["b"], ["y"], name="out"),
    ]
    return _model_bytes(_graph(nodes))


def _undefined_input() -> bytes:
    return _model_bytes(_graph([helper.make_node("Add", ["x", "missing"], ["y"])]))


def _duplicate_producer() -> bytes:
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    return _model_bytes(_graph(nodes))


def _opset(version: int) -> Callable[[], bytes]:
    return lambda: _model_bytes(_graph([helper.make_node("Relu", ["x"], ["y"])]), opset=version)


@functools.cache
def valid_pt2_bytes() -> bytes:
    """A small valid torch.export archive (Linear → ReLU) that the corrupt variants start from."""
    torch.manual_seed(SEED)
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    program = torch.export.export(module, (torch.zeros(2, 4),))
    program.example_inputs = None
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    return buffer.getvalue()


def _zip_not_export() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        # A fixed date keeps the bytes identical from run to run.
        archive.writestr(
            zipfile.ZipInfo("notes/readme.txt", (2020, 1, 1, 0, 0, 0)), "not an exported program\n"
        )
    return buffer.getvalue()


def _truncated_pt2() -> bytes:
    data = valid_pt2_bytes()
    return data[: len(data) // 2]


def _bit_flipped_pt2() -> bytes:
    data = bytearray(valid_pt2_bytes())
    # Flip the first bytes of the serialized graph (stored uncompressed): its CRC no longer matches and,
    # read anyway, it is no longer JSON. Flipping bytes elsewhere can land in a part the loader never reads.
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith("models/model.json"))
    name_length = int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_length = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_length + extra_length
    for offset in range(start, start + 16):
        data[offset] ^= 0xFF
    return bytes(data)


BAD_INPUTS: tuple[BadInput, ...] = (
    BadInput("empty", "empty.onnx", "an empty file (0 bytes)", "unreadable", bytes),
    BadInput(
        "random_bytes", "random_bytes.onnx", "256 random bytes, not protobuf", "unreadable", _random_bytes
    ),
    BadInput(
        "truncated",
        "truncated.onnx",
        "a valid model cut in half, inside a weight",
        "unreadable",
        _truncated_model,
    ),
    BadInput(
        "tensor_not_model",
        "tensor.onnx",
        "a serialized TensorProto, a protobuf message that is not a ModelProto",
        "unreadable",
        _tensor_not_model,
    ),
    BadInput("cycle", "cycle.onnx", "a graph whose nodes form a cycle (a → b → a)", "check", _cycle),
    BadInput(
        "undefined_input",
        "undefined_input.onnx",
        "a node reads a value nothing defines",
        "check",
        _undefined_input,
    ),
    BadInput(
        "duplicate_producer",
        "duplicate_producer.onnx",
        "two nodes write the same value",
        "check",
        _duplicate_producer,
    ),
    BadInput(
        "opset_too_new",
        "opset_99.onnx",
        "default-domain opset 99, newer than any release",
        "opset",
        _opset(99),
    ),
    BadInput(
        "pt2_not_export",
        "not_export.pt2",
        "a zip archive holding a text file, not a torch.export archive",
        "unreadable",
        _zip_not_export,
    ),
    BadInput(
        "pt2_truncated",
        "truncated.pt2",
        "a valid torch.export archive cut in half",
        "unreadable",
        _truncated_pt2,
    ),
    BadInput(
        "pt2_bit_flipped",
        "bit_flipped.pt2",
        "a valid torch.export archive with bits flipped in its graph",
        "unreadable",
        _bit_flipped_pt2,
    ),
)


def get(name: str) -> BadInput:
    return next(b for b in BAD_INPUTS if b.name == name)


def write_all(directory: Path) -> dict[str, Path]:
    """Write every bad input into `directory`; returns {name: path}."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    return {bad.name: bad.write(directory) for bad in BAD_INPUTS}
