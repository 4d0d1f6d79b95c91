"""``graphopt.optimize``: load, run the pipeline, check the outputs, write."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from . import io
from .errors import BadInput, VerificationError
from .ir import op_counts
from .numeric import Tolerance, compare, input_specs, random_inputs
from .pipeline import run_passes, select_passes
from .report import Report
from .traffic import estimate_traffic


class Optimized(NamedTuple):
    model: Any  # onnx.ModelProto or torch.export.ExportedProgram, like the input
    report: Report


def optimize(
    model: Any,
    *,
    output: str | os.PathLike | None = None,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    verify: bool = True,
    force: bool = False,
    seed: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    tolerances: Mapping[Any, Tolerance] | None = None,
    check_each_pass: bool = False,
    on_pass: Callable[[int, int, str], None] | None = None,
) -> Optimized:
    """Optimizes a model: a path (.onnx or .pt2), an onnx.ModelProto or a torch.export.ExportedProgram.

    Returns the optimized model (same kind as the input) and a report. With ``verify`` (the default)
    the original and optimized models run on the same random inputs and a mismatch raises
    VerificationError unless ``force``. With ``output`` the result is written there atomically; the
    input is never overwritten.
    """
    passes = select_passes(only, skip)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    source = io.load(model)
    if output is not None and source.path is not None and Path(output).resolve() == source.path.resolve():
        raise BadInput(f"refusing to overwrite the input {source.path}; choose another output path")
    graph = source.graph
    seconds["load"] = time.perf_counter() - start
    ops_before, traffic_before = op_counts(graph), estimate_traffic(graph)

    start = time.perf_counter()
    pass_reports = run_passes(graph, passes, check_each=check_each_pass, on_pass=on_pass)
    seconds["passes"] = time.perf_counter() - start

    start = time.perf_counter()
    optimized = io.to_model(source)
    seconds["build"] = time.perf_counter() - start
    report = Report(
        source=source.label,
        frontend=source.frontend,
        passes=pass_reports,
        ops_before=ops_before,
        ops_after=op_counts(graph),
        traffic_before=traffic_before,
        traffic_after=estimate_traffic(graph),
        seconds=seconds,
    )
    if verify:
        start = time.perf_counter()
        report.verification = check_outputs(
            source, optimized, seed=seed, input_shapes=input_shapes, tolerances=tolerances
        )
        seconds["verify"] = time.perf_counter() - start
        if not report.verification["ok"] and not force:
            raise VerificationError(
                f"the optimized model computes different outputs: {report.verification['summary']}"
            )
    if output is not None:
        start = time.perf_counter()
        report.output = str(io.write(optimized, output, source))
        seconds["write"] = time.perf_counter() - start
    return Optimized(optimized, report)


def check_outputs(
    source: io.Source, optimized: Any, *, seed: int = 0, input_shapes=None, tolerances=None
) -> dict[str, Any]:
    """Runs the original and the optimized model on the same random inputs and compares the outputs."""
    from .runners import run_onnx, run_program

    graph = source.graph
    try:
        specs = input_specs(graph, input_shapes)
    except ValueError as error:
        raise BadInput(str(error)) from None
    feeds = random_inputs(specs, seed)
    base = source.path.parent if source.path is not None else graph.meta.get("base_dir")
    if source.frontend == "onnx":
        names, expected = run_onnx(source.original, feeds, base)
        _, actual = run_onnx(optimized, feeds, base)
    else:
        names, expected = run_program(source.original, feeds)
        _, actual = run_program(optimized, feeds)
    verdict = compare(expected, actual, names, tolerances)
    verdict["inputs"] = {name: {"dtype": str(d), "shape": list(s)} for name, (d, s) in specs.items()}
    verdict["seed"] = seed
    return verdict
