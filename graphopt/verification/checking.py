"""The numeric check: the original model's outputs on fixed inputs, and how a candidate compares.

The original runs once (``Reference.of``) on each draw of inputs (``draws``); every candidate
(the optimized model, and each replay while bisecting) runs on the same draws, one session for all of
them, and is compared with per-dtype tolerances. Runs happen one after the other, so at most one
runtime session (and one copy of the weights) is alive at a time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..dependencies import MissingDependency
from ..errors import BadInput
from ..files import model_files
from ..ir import DType, Graph
from .draws import Draw, random_draws
from .npz_inputs import feeds_from_arrays, load_npz
from .numeric import Tolerance, compare, input_specs, resolve_tolerances, tolerance_dtype
from .random_ops import random_ops

log = logging.getLogger(__name__)

# What the float64 second opinion (float64_check) may cost. An evaluation of the original in float64
# computes about (elements of the draw's inputs) x (nodes of the original) values of 8 bytes, and
# ONNX's reference evaluator keeps each until the run ends: one evaluation may compute at most
# FLOAT64_VALUES of them (4 GiB by that count), all evaluations of one check FLOAT64_WORK (seconds
# of a CPU core: the seed's 4M-element input through its 69 nodes takes 0.4 s an evaluation). Past
# these the plain verdict stands, and says so. (Ten evaluations of that input took a damaged file
# past the loader fuzzing's 120 s on a loaded machine.)
FLOAT64_VALUES = 1 << 29
FLOAT64_WORK = 1 << 32

Inputs = Mapping[str, np.ndarray] | str | os.PathLike


def prepare_draws(
    graph: Graph,
    *,
    inputs: Inputs | None = None,
    seed: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> list[Draw]:
    """The check's inputs: the given arrays (or .npz file), else random draws that fit the graph
    (``draws.random_draws``: a standard-normal draw and draws that stress the dtypes)."""
    if inputs is not None:
        if input_shapes:
            raise BadInput("give either --inputs or --input-shape, not both (the arrays fix the shapes)")
        arrays = load_npz(inputs) if isinstance(inputs, str | os.PathLike) else inputs
        return [Draw("given", feeds_from_arrays(graph, arrays))]
    try:
        specs = input_specs(graph, input_shapes)
        return random_draws(specs, seed)
    except ValueError as error:
        raise BadInput(str(error)) from None
    except MemoryError:
        sizes = ", ".join(f"{name}: {dtype.name}{list(shape)}" for name, (dtype, shape) in specs.items())
        raise BadInput(
            f"the numeric check's random inputs do not fit in memory ({sizes}); give smaller sizes "
            "with --input-shape, real inputs with --inputs, or skip the check with --no-verify"
        ) from None


def run_model(frontend: str, model: Any, draws: Sequence[Draw], base: Path | None):
    """(output names, the outputs of each draw) of an ONNX model in ONNX Runtime (one session,
    without ONNX Runtime's own graph optimizations, which change numerics) or a program in torch."""
    from ..runtime.runners import run_onnx_many, run_program_many

    feeds = [draw.feeds for draw in draws]
    if frontend == "onnx":
        return run_onnx_many(model, feeds, base, exact=True)
    return run_program_many(model, feeds)


@dataclass
class Reference:
    frontend: str
    draws: list[Draw]
    names: list[str]
    outputs: list[list[Any]]  # per draw
    base: Path | None
    tolerances: dict[DType, Tolerance]
    original: Any = None  # (for the float64 evaluation that judges a disagreement again)
    float64: dict[int, dict | None] = field(default_factory=dict)  # per draw and mode, when needed
    nodes: int = 1  # (the original's, for the cost of a float64 evaluation)
    float64_work: int = 0  # (values computed by float64 evaluations so far)

    @classmethod
    def of(cls, source: model_files.Source, draws: Sequence[Draw], tolerances=None) -> Reference:
        """Runs the original model; BadInput if it cannot run (it is then no reference for anything)."""
        base = source.path.parent if source.path is not None else source.graph.meta.get("base_dir")
        runtime = "ONNX Runtime" if source.frontend == "onnx" else "torch"
        found = random_ops(source)
        if found:
            more = f" and {len(found) - 1} more" if len(found) > 1 else ""
            dropout = any("dropout" in op.lower() for op in found)
            fix = (
                "export it after model.eval()" if dropout else "give the model its random values as an input"
            )
            raise BadInput(
                f"{source.label}: the model draws random values ({found[0]}{more}), so its outputs change "
                f"from run to run and the numeric check cannot compare them; {fix}, or skip the check "
                "with --no-verify"
            )
        try:
            names, outputs = run_model(source.frontend, source.original, draws, base)
        except MissingDependency as error:
            raise MissingDependency(f"{error}; or skip the check with --no-verify") from None
        except Exception as error:  # each runtime raises its own kinds; all mean the model does not run
            raise BadInput(
                f"{source.label}: {runtime} cannot run the model for the numeric check "
                f"({_first_line(error)}); use --no-verify to skip the check"
            ) from None
        tolerances = _computed_precision(source.graph, tolerances)
        return cls(
            source.frontend, list(draws), names, outputs, base, tolerances, source.original,
            nodes=max(len(source.graph), 1),
        )  # fmt: skip

    @property
    def feeds(self) -> dict[str, np.ndarray]:
        """The first draw's inputs (the given ones, or the standard-normal draw)."""
        return self.draws[0].feeds

    def check(self, model: Any) -> dict[str, Any]:
        """The verdict on ``model`` (JSON-ready): the first draw it fails on, else the first draw's
        comparison (and the draws that passed only on the float64 second opinion); a model that fails
        to run is a mismatch."""
        try:
            _, actual = run_model(self.frontend, model, self.draws, self.base)
        except Exception as error:  # a model we wrote that does not run is a wrong model
            log.info("the candidate model fails to run: %s", error)
            why = f"the optimized model fails to run ({_first_line(error)})"
            return {"ok": False, "summary": why, "outputs": []}
        verdicts = [
            compare(
                want,
                got,
                self.names,
                draw.tolerances(self.tolerances),
                stress=draw.stress,
                ill_conditioned=draw.ill_conditioned,
            )
            for draw, want, got in zip(self.draws, self.outputs, actual, strict=True)
        ]
        rejudged = [i for i, v in enumerate(verdicts) if not v["ok"] and v["outputs"]]
        verdicts = [
            self._second_opinion(i, v, actual[i]) if i in rejudged else v for i, v in enumerate(verdicts)
        ]
        draws = [
            {"name": d.name, "ok": v["ok"], "summary": v["summary"]}
            for d, v in zip(self.draws, verdicts, strict=True)
        ]
        failed = [(d, v) for d, v in zip(self.draws, verdicts, strict=True) if not v["ok"]]
        if not failed:
            # A draw that passed only on the float64 second opinion is named: the first draw's
            # comparison alone would read as if every draw had matched.
            notes = [f"on the {self.draws[i].name} inputs, {verdicts[i]['summary']}" for i in rejudged if i]
            return {**verdicts[0], "summary": "; ".join([verdicts[0]["summary"], *notes]), "draws": draws}
        draw, verdict = failed[0]
        summary = (
            verdict["summary"] if len(self.draws) == 1 else f"on the {draw.name} inputs, {verdict['summary']}"
        )
        return {**verdict, "summary": summary, "draws": draws}

    def _second_opinion(self, index: int, verdict: dict[str, Any], got: Sequence[Any]) -> dict[str, Any]:
        """A failed draw judged again against the original's float64 evaluation (float64_check):
        exact and as stored first, and only if that is not enough, with noisy rounding (each
        evaluation costs a run of the original in float64)."""
        from .float64_check import rejudge
        from .stored_rounding import EXACT, MODES, STORED

        if self.original is None:
            return verdict
        draw = self.draws[index]
        tolerances = draw.tolerances(self.tolerances)
        judged = verdict
        for modes in ((EXACT, STORED), MODES):
            over = self._over_budget(index, modes)
            if over:
                return {**judged, "summary": f"{judged['summary']} (no float64 second opinion: {over})"}
            evaluations = self._float64(index, modes)
            if evaluations is None or any(len(run) != len(got) for run in evaluations.values()):
                return verdict
            judged = rejudge(verdict, self.outputs[index], got, evaluations, tolerances, stress=draw.stress)
            if judged["ok"]:
                return judged
        return judged

    def _over_budget(self, index: int, modes: Sequence[int]) -> str | None:
        """Why the float64 evaluations of draw ``index`` in ``modes`` not yet made would cost too
        much (FLOAT64_VALUES, FLOAT64_WORK), or None; charges them when they do not."""
        known = self.float64.get(index, {})
        missing = [mode for mode in modes if mode not in (known or ())]
        if known is None or not missing:
            return None  # (nothing to evaluate, or the original cannot be evaluated in float64)
        elements = sum(int(np.size(a)) for a in self.draws[index].feeds.values())
        values = max(elements, 1) * self.nodes
        if values > FLOAT64_VALUES or self.float64_work + values * len(missing) > FLOAT64_WORK:
            return (
                f"{len(missing)} evaluation(s) of {elements} input elements through {self.nodes} nodes "
                "exceed its budget; smaller sizes (--input-shape) get one"
            )
        self.float64_work += values * len(missing)
        return None

    def _float64(self, index: int, modes: Sequence[int]) -> dict[int, list] | None:
        """The original's float64 evaluations of draw ``index`` in ``modes``, each computed once."""
        from .float64_check import float64_reference

        known = self.float64.setdefault(index, {})
        if known is None:
            return None
        missing = [mode for mode in modes if mode not in known]
        if missing:
            feeds = [self.draws[index].feeds]
            found = float64_reference(self.frontend, self.original, feeds, self.base, missing)
            if found is None:
                self.float64[index] = None
                return None
            known.update(found[0])
        return {mode: known[mode] for mode in modes}

    def describe_inputs(self) -> dict[str, Any]:
        return {name: {"dtype": str(a.dtype), "shape": list(a.shape)} for name, a in self.feeds.items()}


def _computed_precision(graph: Graph, given) -> dict[DType, Tolerance]:
    """The tolerances; where every wider float output of the model is computed through 16-bit floats
    (an fp16 model converted with its inputs and outputs kept in float32: Casts at the boundaries), the
    wider dtypes get the 16-bit dtype's tolerance: those outputs carry 16-bit rounding, and float32's
    tolerance would refuse any rewrite that rounds differently inside. A model with any wider output
    computed in wide floats alone keeps the wide tolerances, and so does a dtype the caller gave one for."""
    resolved = resolve_tolerances(given)
    wide = [v for v in graph.outputs if v.dtype in (DType.FLOAT32, DType.FLOAT64)]
    rounded = _rounded_to_16_bits(graph)
    narrow = [rounded.get(v) for v in wide]
    if not wide or not all(narrow):
        return resolved
    explicit = {tolerance_dtype(key, key) for key in (given or {})}
    loosest = Tolerance(max(resolved[d].rtol for d in narrow), max(resolved[d].atol for d in narrow))
    for dtype in (DType.FLOAT32, DType.FLOAT64):
        if dtype not in explicit:
            t = resolved[dtype]
            resolved[dtype] = Tolerance(max(t.rtol, loosest.rtol), max(t.atol, loosest.atol))
    return resolved


def _rounded_to_16_bits(graph: Graph) -> dict:
    """For each computed value, the 16-bit float dtype that it or a value computed on the way to it is
    rounded to (the loosest, bfloat16, where both are), or None; one pass in the graph's order.
    Constants and inputs are not computed."""
    rounded: dict = {}

    def looser(a, b):
        return DType.BFLOAT16 if DType.BFLOAT16 in (a, b) else a or b

    for node in graph:
        if node.op == "constant":
            continue
        inherited = None
        for value in node.inputs:
            if value is not None and value.const is None:
                inherited = looser(inherited, rounded.get(value))
        for value in node.outputs:
            own = value.dtype if value.dtype in (DType.FLOAT16, DType.BFLOAT16) else None
            rounded[value] = looser(inherited, own)
    return rounded


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {line[:300]}" if line else type(error).__name__
