"""Write the bundled demo models into models/ (or another directory).

    python -m models.export [--out DIR]

- `split_stack.onnx`: the seed at its own sizes (N=16, B=1024, D=256), dynamo exporter, opset 20;
- `split_stack.pt2`: the same module through `torch.export.save`;
- `mlp.onnx`: a Linear → LayerNorm → GELU MLP with a dynamic batch dimension, dynamo exporter.

Weights are tiny and seeded, so the files are small and the same on every run. The exporters record each
node's Python stack trace, which holds the paths of the machine that ran them, and torch.export keeps the
example inputs (16 MiB here); we drop both.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import onnx
import torch

from models import mlp, split_stack
from models.onnx_export import export_dynamo

HERE = Path(__file__).resolve().parent
ONNX_STACK_TRACE_KEY = "pkg.torch.onnx.stack_trace"
MLP_CONFIG = {"d_in": 64, "hidden": 64, "d_out": 16, "depth": 2}


def _drop_onnx_stack_traces(graph: onnx.GraphProto) -> None:
    for node in graph.node:
        kept = [p for p in node.metadata_props if p.key != ONNX_STACK_TRACE_KEY]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                _drop_onnx_stack_traces(attribute.g)
            for subgraph in attribute.graphs:
                _drop_onnx_stack_traces(subgraph)


def _slim_program(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    # The program keeps its example inputs, 16 MiB for the seed's sizes; they are not part of the model.
    program.example_inputs = None
    for module in program.graph_module.modules():
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:
                node.meta.pop("stack_trace", None)
    return program


def split_stack_onnx() -> onnx.ModelProto:
    built = export_dynamo(split_stack.SplitStack().eval(), split_stack.example_inputs())
    _drop_onnx_stack_traces(built.graph)
    return built


def split_stack_program() -> torch.export.ExportedProgram:
    program = torch.export.export(split_stack.SplitStack().eval(), split_stack.example_inputs())
    return _slim_program(program)


def mlp_onnx() -> onnx.ModelProto:
    module = mlp.make_mlp(**MLP_CONFIG)
    built = export_dynamo(
        module,
        mlp.example_inputs(d_in=MLP_CONFIG["d_in"]),
        dynamic_shapes={"x": {0: torch.export.Dim("batch")}},
    )
    _drop_onnx_stack_traces(built.graph)
    return built


def mlp_example_inputs(batch: int = 4) -> tuple[torch.Tensor]:
    return mlp.example_inputs(batch=batch, d_in=MLP_CONFIG["d_in"])


BUNDLED: dict[str, Callable[[], onnx.ModelProto | torch.export.ExportedProgram]] = {
    "split_stack.onnx": split_stack_onnx,
    "split_stack.pt2": split_stack_program,
    "mlp.onnx": mlp_onnx,
}


def write(name: str, directory: Path) -> Path:
    path = Path(directory) / name
    built = BUNDLED[name]()
    if isinstance(built, onnx.ModelProto):
        onnx.save_model(built, path)
    else:
        torch.export.save(built, path)
    return path


def export_all(directory: Path = HERE) -> list[Path]:
    Path(directory).mkdir(parents=True, exist_ok=True)
    return [write(name, directory) for name in BUNDLED]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.export", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write into (default: models/)")
    args = parser.parse_args(argv)
    for path in export_all(args.out):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
