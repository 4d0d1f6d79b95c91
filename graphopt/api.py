"""``graphopt.optimize``: load, run the pipeline, check the outputs, write."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from .analysis import estimate_traffic, op_counts
from .errors import BadInput, VerificationError
from .files import model_files
from .gc_pause import collection_paused
from .pipeline import run_passes, select_passes
from .report import Report
from .rewrite import Pass
from .verification.checking import Inputs, Reference, prepare_draws
from .verification.numeric import Tolerance

log = logging.getLogger(__name__)


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
    measure: str | None = None,
    keep_paying_passes: bool = False,
    trust_pickle: bool = False,
    other_outputs: Mapping[str, str | os.PathLike] | None = None,
) -> Optimized:
    """Optimizes a model: a path (.onnx or .pt2), an onnx.ModelProto or a torch.export.ExportedProgram.

    Returns the optimized model (same kind as the input) and a report. With ``verify`` (the default)
    the original and optimized models run on the same inputs (``inputs``: arrays by input name or a
    .npz file; else random ones, seeded, with ``input_shapes`` for symbolic dims) and are compared
    with per-dtype ``tolerances`` (rtol, atol). A mismatch is bisected to the rule and node that caused
    it (unless not ``bisect``) and raises VerificationError unless ``force``. With ``output`` the
    result is written there atomically; the input is never overwritten, nor any file it reads
    (``other_outputs``: more files the caller will write, by what they are, are checked alike).

    With ``measure`` ("cpu" or "cuda") the original and optimized models are also timed there before
    writing, and a model slower beyond the measured noise raises SlowerModel (a VerificationError)
    unless ``force``; with ``keep_paying_passes`` the passes whose removal makes it faster are dropped
    instead (verification/speed_guard.py). ``report.speed`` holds the figures.

    A .pt2 archive that would unpickle objects (a pickle can run any code) is refused unless
    ``trust_pickle``.
    """
    from .frontends.pt2_pickles import pickle_trust

    if measure is not None:
        from .verification.speed_guard import check_device

        check_device(measure)
    elif keep_paying_passes:
        raise BadInput("--keep-paying-passes keeps the passes that pay on a device: give --measure cpu|cuda")
    with collection_paused(), pickle_trust(trust_pickle):
        return _optimize(
            model, output=output, only=only, skip=skip, verify=verify, force=force, seed=seed,
            input_shapes=input_shapes, inputs=inputs, tolerances=tolerances, bisect=bisect,
            check_each_pass=check_each_pass, on_pass=on_pass, measure=measure,
            keep_paying_passes=keep_paying_passes, other_outputs=dict(other_outputs or {}),
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
    measure: str | None = None,
    keep_paying_passes: bool = False,
    other_outputs: dict[str, str | os.PathLike] | None = None,
) -> Optimized:
    passes = select_passes(only, skip)
    if output is not None:
        model_files.check_output(model, output)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    source = model_files.load(model)
    if output is not None:
        writes = {"the output": output, "the output's data file": model_files.data_file(output)}
        model_files.refuse_input_files(source, {**writes, **(other_outputs or {})})
    graph = source.graph
    seconds["load"] = _logged("load", start)
    reference = draws = None
    if verify or measure:
        draws = prepare_draws(graph, inputs=inputs, seed=seed, input_shapes=input_shapes)
    base_dir = source.path.parent if source.path is not None else graph.meta.get("base_dir")
    if verify:
        # The original runs before any work: bad inputs for the check, and a model the runtime cannot
        # run (a damaged one the checker let through), are refused first.
        start = time.perf_counter()
        reference = Reference.of(source, draws, tolerances)
        seconds["reference"] = _logged("run the original for the check", start)
    ops_before, traffic_before = op_counts(graph), estimate_traffic(graph)

    start = time.perf_counter()
    pass_reports = run_passes(graph, passes, check_each=check_each_pass, on_pass=on_pass)
    seconds["passes"] = _logged(f"{len(passes)} passes", start)

    start = time.perf_counter()
    optimized = model_files.to_model(source)
    seconds["build"] = _logged(f"build the {source.frontend} model", start)
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
        seconds["verify"] = _logged("numeric check", start)
        if not report.verification["ok"]:
            message = f"the optimized model computes different outputs: {report.verification['summary']}"
            culprit = report.verification.get("culprit")
            if culprit is not None:
                message += f"; first wrong rewrite: {culprit['description']}"
            if not force:
                raise VerificationError(message, report)
            report.notes.append(f"{message} (written anyway: --force)")
    if measure:
        start = time.perf_counter()

        def rebuild(dropped: Sequence[str], check: bool = False) -> Optimized:
            return _optimize(
                model, output=None, only=only, skip=(*skip, *dropped), verify=check, force=force,
                seed=seed, input_shapes=input_shapes, inputs=inputs, tolerances=tolerances,
                bisect=bisect, check_each_pass=check_each_pass, on_pass=None,
            )  # fmt: skip

        # Timed on the first draw (the given inputs, or the standard-normal ones).
        feeds = draws[0].feeds
        optimized, report = _guard_speed(
            source.original, optimized, report, feeds, measure, base_dir, rebuild, keep_paying_passes, force
        )
        seconds["measure"] = _logged("speed guard", start)
    if output is not None:
        start = time.perf_counter()
        report.output = str(model_files.write(optimized, output, source))
        seconds["write"] = _logged(f"write {output}", start)
    graph.release()  # freed now by reference counting, not later by a walk of the cycle collector
    return Optimized(optimized, report)


def _guard_speed(original, optimized, report, feeds, device, base_dir, rebuild, keep_paying, force):
    """Times the optimized model against the original; see verification/speed_guard.py."""
    from .verification.speed_guard import SlowerModel, guard, measure

    def time_against(first, second):
        return measure(original if first is None else first, second, feeds, device, base_dir=base_dir)

    changed = [p.name for p in report.passes if p.changed]
    try:
        _, check, dropped = guard(
            time_against(None, optimized),
            (lambda names: rebuild(names).model) if keep_paying else None,
            changed,
            time_against,
            optimized,
        )
    except SlowerModel as slower:
        if not force:
            raise SlowerModel(str(slower), report) from None
        report.notes.append(f"{slower} (written anyway: --force)")
        return optimized, report
    if dropped:
        # The model of the passes that paid gets its own report and numeric check.
        optimized, report = rebuild(dropped, report.verification is not None)
        report.notes.append(f"speed guard: dropped {', '.join(dropped)} (the model is faster without them)")
    report.speed = check.to_json()
    return optimized, report


def _logged(step: str, start: float) -> float:
    """Seconds since ``start``, logged (``graphopt -v``) as what the step did and how long it took."""
    seconds = time.perf_counter() - start
    log.info("%s: %.1f ms", step, seconds * 1e3)
    return seconds


def _verify(model, optimized, passes: Sequence[Pass], reference: Reference, seed: int, bisect: bool):
    verdict = reference.check(optimized)
    verdict["inputs"] = reference.describe_inputs()
    verdict["seed"] = seed
    if not verdict["ok"] and bisect:
        from .verification.bisection import bisect as find_culprit

        culprit = find_culprit(model, passes, reference)
        verdict["culprit"] = None if culprit is None else culprit.to_json()
    return verdict
