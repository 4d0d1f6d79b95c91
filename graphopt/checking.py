"""The numeric check: the original model's outputs on fixed inputs, and how a candidate compares.

The original runs once (``Reference.of``); every candidate (the optimized model, and each replay while
bisecting) runs on the same inputs and is compared with per-dtype tolerances. Runs happen one after
the other, so at most one runtime session (and one copy of the weights) is alive at a time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import io
from .dependencies import MissingDependency
from .errors import BadInput
from .ir import DType, Graph
from .npz_inputs import feeds_from_arrays, load_npz
from .numeric import Tolerance, compare, input_specs, random_inputs, resolve_tolerances

log = logging.getLogger(__name__)

Inputs = Mapping[str, np.ndarray] | str | os.PathLike


def prepare_feeds(
    graph: Graph,
    *,
    inputs: Inputs | None = None,
    seed: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, np.ndarray]:
    """The check's inputs: the given arrays (or .npz file), else random ones that fit the graph."""
    if inputs is not None:
        if input_shapes:
            raise BadInput("give either --inputs or --input-shape, not both (the arrays fix the shapes)")
        arrays = load_npz(inputs) if isinstance(inputs, str | os.PathLike) else inputs
        return feeds_from_arrays(graph, arrays)
    try:
        specs = input_specs(graph, input_shapes)
    except ValueError as error:
        raise BadInput(str(error)) from None
    return random_inputs(specs, seed)


def run_model(frontend: str, model: Any, feeds: dict[str, np.ndarray], base: Path | None):
    """(output names, output arrays) of an ONNX model in ONNX Runtime (without its own graph
    optimizations, which change numerics) or a program in torch."""
    from .runners import run_onnx, run_program

    if frontend == "onnx":
        return run_onnx(model, feeds, base, exact=True)
    return run_program(model, feeds)


@dataclass
class Reference:
    frontend: str
    feeds: dict[str, np.ndarray]
    names: list[str]
    outputs: list[Any]
    base: Path | None
    tolerances: dict[DType, Tolerance]

    @classmethod
    def of(cls, source: io.Source, feeds: dict[str, np.ndarray], tolerances=None) -> Reference:
        """Runs the original model; BadInput if it cannot run (it is then no reference for anything)."""
        base = source.path.parent if source.path is not None else source.graph.meta.get("base_dir")
        runtime = "ONNX Runtime" if source.frontend == "onnx" else "torch"
        try:
            names, outputs = run_model(source.frontend, source.original, feeds, base)
        except MissingDependency as error:
            raise MissingDependency(f"{error}; or skip the check with --no-verify") from None
        except Exception as error:  # each runtime raises its own kinds; all mean the model does not run
            raise BadInput(
                f"{source.label}: {runtime} cannot run the model for the numeric check "
                f"({_first_line(error)}); use --no-verify to skip the check"
            ) from None
        return cls(source.frontend, feeds, names, outputs, base, resolve_tolerances(tolerances))

    def check(self, model: Any) -> dict[str, Any]:
        """The verdict on ``model`` (JSON-ready); a model that fails to run is a mismatch."""
        try:
            _, actual = run_model(self.frontend, model, self.feeds, self.base)
        except Exception as error:  # a model we wrote that does not run is a wrong model
            log.info("the candidate model fails to run: %s", error)
            why = f"the optimized model fails to run ({_first_line(error)})"
            return {"ok": False, "summary": why, "outputs": []}
        return compare(self.outputs, actual, self.names, self.tolerances)

    def describe_inputs(self) -> dict[str, Any]:
        return {name: {"dtype": str(a.dtype), "shape": list(a.shape)} for name, a in self.feeds.items()}


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {line[:300]}" if line else type(error).__name__
