"""``graphopt.optimize``: load, run the pipeline, check the outputs, write."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from . import io
from .checking import Inputs, Reference, prepare_draws
from .errors import BadInput, VerificationError
from .gc_pause import collection_paused
from .ir import op_counts
from .numeric import Tolerance
from .pipeline import run_passes, select_passes
from .report import Report
from .rewrite import Pass
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
    inputs: Inputs | None = None,
    tolerances: Mapping[Any, Tolerance | tuple[float, float]] | None = None,
    bisect: bool = True,
    check_each_pass: bool = False,
    on_pass: Callable[[int, int, str], None] | None = None,
) -> Optimized:
    """Optimizes a model: a path (.onnx or .pt2), an onnx.ModelProto or a torch.export.ExportedProgram.

    Returns the optimized model (same kind as the input) and a report. With ``verify`` (the default)
    the original and optimized models run on the same inputs (``inputs``: arrays by input name or a
    .npz file; else random ones, seeded, with ``input_shapes`` for symbolic dims) and are compared
    with per-dtype ``tolerances`` (rtol, atol). A mismatch is bisected to the rule and node that caused
    it (unless not ``bisect``) and raises VerificationError unless ``force``. With ``output`` the
    result is written there atomically; the input is never overwritten.
    """
    with collection_paused():
        return _optimize(
            model, output=output, only=only, skip=skip, verify=verify, force=force, seed=seed,
            input_shapes=input_shapes, inputs=inputs, tolerances=tolerances, bisect=bisect,
            check_each_pass=check_each_pass, on_pass=on_pass,
        )  # fmt: skip


def _optimize(
    model: Any,
    *,
    output,
    only: Sequence[str],
    skip: Sequence[str],
    verify: bool,
    force: bool,
    seed: int,
    input_shapes,
    inputs,
    tolerances,
    bisect: bool,
    check_each_pass: bool,
    on_pass,
) -> Optimized:
    passes = select_passes(only, skip)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    source = io.load(model)
    if output is not None and source.path is not None and Path(output).resolve() == source.path.resolve():
        raise BadInput(f"refusing to overwrite the input {source.path}; choose another output path")
    graph = source.graph
    seconds["load"] = time.perf_counter() - start
    reference = None
    if verify:
        # The original runs before any work: bad inputs for the check, and a model the runtime cannot
        # run (a damaged one the checker let through), are refused first.
        start = time.perf_counter()
        draws = prepare_draws(graph, inputs=inputs, seed=seed, input_shapes=input_shapes)
        reference = Reference.of(source, draws, tolerances)
        seconds["reference"] = time.perf_counter() - start
    ops_before, traffic_before = op_counts(graph), estimate_traffic(graph)

    start = time.perf_counter()
    pass_reports = run_passes(graph, passes, check_each=check_each_pass, on_pass=on_pass)
    seconds["passes"] = time.perf_counter() - start

    start = time.perf_counter()
    optimized = io.to_model(source)
    seconds["build"] = time.perf_counter() - start
    ops_after = op_counts(graph)
    written = len(optimized.graph.node) if source.frontend == "onnx" else None
    report = Report(
        source=source.label,
        frontend=source.frontend,
        passes=pass_reports,
        ops_before=ops_before,
        ops_after=ops_after,
        traffic_before=traffic_before,
        traffic_after=estimate_traffic(graph),
        seconds=seconds,
        notes=list(graph.meta.get("notes", ())),
        nodes_written=None if written == sum(ops_after.values()) else written,
    )
    if reference is not None:
        start = time.perf_counter()
        report.verification = _verify(model, optimized, passes, reference, seed, bisect)
        seconds["verify"] = time.perf_counter() - start
        if not report.verification["ok"]:
            message = f"the optimized model computes different outputs: {report.verification['summary']}"
            culprit = report.verification.get("culprit")
            if culprit is not None:
                message += f"; first wrong rewrite: {culprit['description']}"
            if not force:
                raise VerificationError(message, report)
            report.notes.append(f"{message} (written anyway: --force)")
    if output is not None:
        start = time.perf_counter()
        report.output = str(io.write(optimized, output, source))
        seconds["write"] = time.perf_counter() - start
    graph.release()  # freed now by reference counting, not later by a walk of the cycle collector
    return Optimized(optimized, report)


def _verify(model, optimized, passes: Sequence[Pass], reference: Reference, seed: int, bisect: bool):
    verdict = reference.check(optimized)
    verdict["inputs"] = reference.describe_inputs()
    verdict["seed"] = seed
    if not verdict["ok"] and bisect:
        from .bisect import bisect as find_culprit

        culprit = find_culprit(model, passes, reference)
        verdict["culprit"] = None if culprit is None else culprit.to_json()
    return verdict


def check_outputs(
    source: io.Source,
    optimized: Any,
    *,
    seed: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    inputs: Inputs | None = None,
    tolerances: Mapping[Any, Tolerance | tuple[float, float]] | None = None,
) -> dict[str, Any]:
    """Runs the original and the optimized model on the same inputs and compares the outputs."""
    draws = prepare_draws(source.graph, inputs=inputs, seed=seed, input_shapes=input_shapes)
    reference = Reference.of(source, draws, tolerances)
    verdict = reference.check(optimized)
    verdict["inputs"] = reference.describe_inputs()
    verdict["seed"] = seed
    return verdict
