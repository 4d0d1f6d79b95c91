"""Comparing what two models compute: the shapes of the random inputs (symbolic dims given sizes),
per-dtype tolerances, and the comparison of outputs. The inputs themselves are drawn by
``graphopt.verification.draws``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import DType, Graph

# Symbolic dims get this size unless the caller says otherwise.
DEFAULT_DIM = 2
# Random inputs larger than this in all are refused: a model that asks for them has absurd dims
# (a damaged file), or needs --input-shape.
MAX_INPUT_BYTES = 2 << 30


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


DEFAULT_TOLERANCES: dict[DType, Tolerance] = {
    DType.FLOAT64: Tolerance(1e-7, 1e-9),
    DType.FLOAT32: Tolerance(1e-4, 1e-5),
    DType.FLOAT16: Tolerance(1e-2, 1e-2),
    DType.BFLOAT16: Tolerance(2e-2, 2e-2),
}
FLOAT_DTYPES = tuple(DEFAULT_TOLERANCES)
TOLERANCE_SYNTAX = (
    "expected [DTYPE=]RTOL,ATOL, e.g. float16=1e-2,1e-3 (DTYPE: float64, float32, float16, bfloat16)"
)


def parse_tolerance(text: str) -> dict[DType, Tolerance]:
    """``float16=1e-2,1e-3`` sets one dtype's tolerance; ``1e-3,1e-5`` sets every float dtype's."""
    name, _, numbers = text.rpartition("=")
    try:
        rtol, atol = (float(part) for part in numbers.split(","))
    except ValueError:
        raise ValueError(f"tolerance {text!r}: {TOLERANCE_SYNTAX}") from None
    if not (rtol >= 0 and atol >= 0):  # (also refuses NaN)
        raise ValueError(f"tolerance {text!r}: RTOL and ATOL must be non-negative numbers")
    if not name:
        return dict.fromkeys(FLOAT_DTYPES, Tolerance(rtol, atol))
    return {tolerance_dtype(name, text): Tolerance(rtol, atol)}


def resolve_tolerances(tolerances: Mapping[Any, Any] | None) -> dict[DType, Tolerance]:
    """The default tolerances with the caller's on top; keys may be DTypes, names or NumPy dtypes,
    values Tolerances or (rtol, atol) pairs."""
    resolved = dict(DEFAULT_TOLERANCES)
    for key, value in (tolerances or {}).items():
        resolved[tolerance_dtype(key, key)] = (
            value if isinstance(value, Tolerance) else Tolerance(*map(float, value))
        )
    return resolved


def tolerance_dtype(key: Any, where: Any) -> DType:
    """The float DType a tolerance key names: a DType, its name, or a NumPy dtype."""
    if isinstance(key, DType):
        dtype = key
    else:
        name = key if isinstance(key, str) else np.dtype(key).name
        dtype = DType.__members__.get(name.strip().upper())
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"tolerance {where!r}: {key!r} is not a float dtype; {TOLERANCE_SYNTAX}")
    return dtype


def input_specs(
    graph: Graph, overrides: Mapping[str, Sequence[int]] | None = None
) -> dict[str, tuple[DType, tuple[int, ...]]]:
    """Concrete (dtype, shape) for every graph input; one size per symbolic dim name."""
    overrides = dict(overrides or {})
    by_name = {value.name: value for value in graph.inputs}
    for name, sizes in overrides.items():
        value = by_name.get(name)
        if value is None:
            known = ", ".join(repr(n) for n in by_name) or "none"
            raise ValueError(
                f"--input-shape names {name!r}, which is not an input of the model (its inputs: {known})"
            )
        if value.shape is not None and len(sizes) != len(value.shape):
            raise ValueError(
                f"--input-shape gives input {name!r} {len(sizes)} dims ({'x'.join(map(str, sizes))}); "
                f"the model declares {len(value.shape)} ({list(value.shape)})"
            )
    symbols: dict[str, int] = {}
    for value in graph.inputs:
        if value.name in overrides and value.shape is not None:
            for dim, size in zip(value.shape, overrides[value.name], strict=False):
                if isinstance(dim, str):
                    symbols.setdefault(dim, int(size))
    specs = {}
    for value in graph.inputs:
        if value.name in overrides:
            shape = tuple(int(d) for d in overrides[value.name])
        elif value.shape is None:
            raise ValueError(f"input {value.name!r} has no known shape; give one with --input-shape")
        else:
            shape = tuple(
                d if isinstance(d, int) else symbols.setdefault(d, DEFAULT_DIM) if d else 1
                for d in value.shape
            )
        if value.dtype is None:
            raise ValueError(f"input {value.name!r} has no known element type")
        if any(d < 0 for d in shape):
            raise ValueError(f"input {value.name!r} has a negative dim {list(shape)}; expected sizes >= 0")
        specs[value.name] = (value.dtype, shape)
    total = sum(int(np.prod(shape, dtype=np.float64)) * dtype.itemsize for dtype, shape in specs.values())
    if total > MAX_INPUT_BYTES:
        described = ", ".join(f"{name}: {list(shape)}" for name, (_, shape) in specs.items())
        raise ValueError(
            f"random inputs of {total / 2**30:.1f} GiB ({described}) are too large for the numeric check; "
            "give smaller ones with --input-shape or real ones with --inputs"
        )
    return specs


def compare(
    expected: Sequence[Any],
    actual: Sequence[Any],
    names: Sequence[str],
    tolerances: Mapping[DType, Tolerance] | None = None,
    *,
    stress: bool = False,
    ill_conditioned: bool = False,
) -> dict[str, Any]:
    """Elementwise comparison of two lists of outputs; returns a JSON-ready verdict.

    NaN and infinity must sit where the original has them. ``stress``: relative errors are taken
    against the largest magnitude in each row (last axis) of the original, not each element: large
    inputs leave small differences of large numbers, whose rounding is that of the large ones.
    ``ill_conditioned``: the candidate may also give NaN or infinity where the original gives a
    finite value (a 0/0 that the original's rounding turned into a finite quotient). On a
    ``stress`` draw, a NaN of the original judges nothing: its inputs are finite, so the NaN is the
    garbage of an overflow inside the original (a mean of finite values near float32's top summed
    to inf, then inf - inf), and a candidate that does not overflow there (a fused norm) may give
    any value. Its infinities must still be matched, and on the standard-normal or given inputs
    its NaNs too."""
    tolerances = resolve_tolerances(tolerances)
    if len(expected) != len(actual):
        why = f"expected {len(expected)} output(s), got {len(actual)}"
        return {"ok": False, "summary": why, "outputs": []}
    results = [
        _compare_one(name, np.asarray(w), np.asarray(g), tolerances, stress, ill_conditioned)
        for name, w, g in zip(names, expected, actual, strict=True)
    ]
    ok = all(r["ok"] for r in results)
    if ok:
        worst = max((r.get("max_abs", 0.0) for r in results), default=0.0)
        summary = f"{len(results)} output(s), max abs error {worst:.3g}"
    else:
        summary = "; ".join(f"{r['name']}: {r['why']}" for r in results if not r["ok"])
    return {"ok": ok, "summary": summary, "outputs": results}


def _compare_one(
    name: str, want: np.ndarray, got: np.ndarray, tolerances, stress: bool, ill_conditioned: bool
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "dtype": str(want.dtype), "shape": list(want.shape)}
    if want.shape != got.shape or want.dtype != got.dtype:
        return {
            **entry,
            "ok": False,
            "why": f"expected {want.dtype}{list(want.shape)}, got {got.dtype}{list(got.shape)}",
        }
    dtype = DType.from_numpy(want.dtype)
    tol = tolerances.get(dtype) if dtype is not None else None
    if tol is None:
        ok = bool(np.array_equal(want, got))
        return {**entry, "ok": ok, "why": "" if ok else "values differ (exact comparison)"}
    w, g = want.astype(np.float64), got.astype(np.float64)
    finite = np.isfinite(w) & np.isfinite(g)
    special_ok = _specials_agree(w, g, stress, ill_conditioned)
    with np.errstate(invalid="ignore"):  # (inf - inf where both are infinite, masked out)
        diff = np.abs(w - g)[finite]
    magnitude = np.abs(np.where(np.isfinite(w), w, 0.0))
    if stress and w.ndim:
        magnitude = np.broadcast_to(magnitude.max(axis=-1, keepdims=True), w.shape)
    scale = magnitude[finite]
    max_abs = float(diff.max()) if diff.size else 0.0
    nonzero = scale > 0
    max_rel = float((diff[nonzero] / scale[nonzero]).max()) if nonzero.any() else 0.0
    # (An infinite tolerance judges NaN/inf positions only; inf * 0 would be NaN.)
    within = tol.atol == math.inf or bool(np.all(diff <= tol.atol + tol.rtol * scale))
    ok = within and special_ok
    why = (
        ""
        if ok
        else (
            "NaN/inf positions differ"
            if not special_ok
            else f"max abs error {max_abs:.3g} beyond rtol={tol.rtol:.3g}, atol={tol.atol:.3g}"
        )
    )
    return {
        **entry,
        "ok": ok,
        "max_abs": max_abs,
        "max_rel": max_rel,
        "rtol": tol.rtol,
        "atol": tol.atol,
        "why": why,
    }


def _specials_agree(want: np.ndarray, got: np.ndarray, stress: bool, ill_conditioned: bool) -> bool:
    """The same infinity where the original has one; NaN where it has NaN, except on a stress draw
    (any value there, see ``compare``); unless ill-conditioned, NaN or infinity nowhere else."""
    nan, inf = np.isnan(want), np.isinf(want)
    if not stress and not np.isnan(got[nan]).all():
        return False
    if not np.array_equal(want[inf], got[inf]):
        return False
    return ill_conditioned or bool(np.isfinite(got[~(nan | inf)]).all())
