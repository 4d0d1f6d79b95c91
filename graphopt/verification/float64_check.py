"""The numeric check's second opinion: where the optimized model and the original disagree, which of
them is nearer to what the original computes with exact arithmetic?

The original as a runtime runs it carries the rounding of that runtime's kernels. Where an output is
ill-conditioned (a norm of a row whose spread is a few ulps of its offset, a tanh of a saturated
value, a product with a damaged weight near the top of float32), that rounding alone moves it by more
than the dtype's tolerance, and a fused op that rounds differently (often less) is refused though it
is no worse. So a draw that fails the plain comparison is judged again against the original evaluated
in float64 (``frontends.onnx_float64``, ``frontends.torch_float64``), in the modes of
``stored_rounding``: with no rounding at all (the exact answer), with each value rounded to the dtype
the model stores it in (ONNX and aten semantics), and with that rounding perturbed (how far legitimate
roundings move each output). The optimized output passes where every element is no farther from the
exact answer than the original is, as run or as evaluated in its own dtypes, within the same
per-dtype tolerance. NaN and infinity are as near as can be to themselves and infinitely far from
anything else. The tolerances are never widened: an output farther from the exact answer than every
evaluation of the original by more than the tolerance still fails.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ir import DType
from .numeric import Tolerance
from .stored_rounding import EXACT

log = logging.getLogger(__name__)


def float64_reference(
    frontend: str, original: Any, feeds: Sequence[dict], base, modes: Sequence[int]
) -> list[dict[int, list[np.ndarray]]] | None:
    """The original's outputs on each set of feeds, evaluated in float64 in each of ``modes`` (of
    ``stored_rounding``); None where it cannot be evaluated so."""
    if frontend == "onnx":
        from ..frontends.onnx_float64 import float64_outputs

        return float64_outputs(original, feeds, base, modes)
    from ..frontends.torch_float64 import float64_outputs as program_outputs

    return program_outputs(original, feeds, modes)


def rejudge(
    verdict: dict[str, Any],
    want: Sequence[Any],
    got: Sequence[Any],
    evaluations: Mapping[int, Sequence[np.ndarray]],
    tolerances: Mapping[DType, Tolerance],
    *,
    stress: bool,
) -> dict[str, Any]:
    """``verdict`` (a failed comparison of ``got`` with ``want``) judged again against the original's
    float64 ``evaluations`` (by mode)."""
    outputs = []
    for position, (entry, w, g) in enumerate(zip(verdict["outputs"], want, got, strict=True)):
        if entry["ok"]:
            outputs.append(entry)
            continue
        exact = np.asarray(evaluations[EXACT][position])
        legitimate = [np.asarray(run[position]) for mode, run in evaluations.items() if mode != EXACT]
        outputs.append(
            _rejudge_one(entry, np.asarray(w), np.asarray(g), exact, legitimate, tolerances, stress)
        )
    ok = all(entry["ok"] for entry in outputs)
    if ok:
        summary = (
            f"{verdict['summary']}, but no farther than the original from its float64 evaluation "
            "(an ill-conditioned output: the original's own rounding)"
        )
    else:
        summary = "; ".join(f"{e['name']}: {e['why']}" for e in outputs if not e["ok"])
    left_out = sum(e.get("float64", {}).get("noisy_runs_of_another_shape", 0) for e in outputs)
    if left_out:
        summary += f" ({left_out} noisy evaluations gave an output of another shape and were left out)"
    return {**verdict, "ok": ok, "summary": summary, "outputs": outputs}


def _rejudge_one(entry, want, got, exact, legitimate, tolerances, stress: bool) -> dict[str, Any]:
    dtype = DType.from_numpy(want.dtype)
    tol = tolerances.get(dtype) if dtype is not None else None
    if tol is None or len({want.shape, got.shape, exact.shape}) != 1:
        return entry  # (not a float output, or not comparable: the plain verdict stands)
    # A noisy evaluation whose output has another shape (a float that sets a size strayed past a
    # boundary) says nothing about this output's rounding: it is left out, and the verdict says so.
    comparable = [run for run in legitimate if run.shape == exact.shape]
    exact = exact.astype(np.float64)
    theirs = _distance(want.astype(np.float64), exact)
    for run in comparable:  # (the original evaluated in its own dtypes is the original too)
        theirs = np.maximum(theirs, _distance(run.astype(np.float64), exact))
    ours = _distance(got.astype(np.float64), exact)
    magnitude = np.abs(np.where(np.isfinite(exact), exact, 0.0))
    if stress and exact.ndim:
        magnitude = np.broadcast_to(magnitude.max(axis=-1, keepdims=True), exact.shape)
    allowed = theirs + (math.inf if tol.atol == math.inf else tol.atol + tol.rtol * magnitude)
    within = ours <= allowed
    float64 = {
        "ok": bool(within.all()),
        "max_abs_original": _finite_max(theirs),
        "max_abs_optimized": _finite_max(ours),
    }
    if len(comparable) < len(legitimate):
        float64["noisy_runs_of_another_shape"] = len(legitimate) - len(comparable)
    if within.all():
        return {**entry, "ok": True, "float64": float64, "why": ""}
    excess = np.where(np.isfinite(ours), ours - theirs, math.inf)
    worst = float(excess[~within].max())
    why = f"{entry['why']}; farther than the original from its float64 evaluation by {worst:.3g}"
    return {**entry, "float64": float64, "why": why}


def _distance(values: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|values - exact|, with NaN at NaN and an infinity at the same infinity 0, and any other
    mismatch of NaN or infinity infinitely far."""
    with np.errstate(invalid="ignore", over="ignore"):
        distance = np.abs(values - exact)
    same = (np.isnan(values) & np.isnan(exact)) | (np.isinf(values) & (values == exact))
    distance[same] = 0.0
    distance[np.isnan(distance)] = math.inf
    return distance


def _finite_max(distance: np.ndarray) -> float | None:
    finite = distance[np.isfinite(distance)]
    return float(finite.max()) if finite.size else None
