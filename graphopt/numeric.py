"""Comparing what two models compute: random inputs that respect dtypes and symbolic dims, and
per-dtype tolerances."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .ir import DType, Graph

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
    return {_float_dtype(name, text): Tolerance(rtol, atol)}


def resolve_tolerances(tolerances: Mapping[Any, Any] | None) -> dict[DType, Tolerance]:
    """The default tolerances with the caller's on top; keys may be DTypes, names or NumPy dtypes,
    values Tolerances or (rtol, atol) pairs."""
    resolved = dict(DEFAULT_TOLERANCES)
    for key, value in (tolerances or {}).items():
        resolved[_float_dtype(key, key)] = (
            value if isinstance(value, Tolerance) else Tolerance(*map(float, value))
        )
    return resolved


def _float_dtype(key: Any, where: Any) -> DType:
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


def random_inputs(specs: Mapping[str, tuple[DType, tuple[int, ...]]], seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal floats, random booleans, and 0 or 1 for integers (valid indices for any
    non-empty axis). Every feed is an array, 0-d ones included: ONNX Runtime takes no NumPy scalar."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, (dtype, shape) in specs.items():
        if dtype.is_float:
            feeds[name] = rng.standard_normal(shape).astype(dtype.numpy)
        elif dtype is DType.BOOL:
            feeds[name] = np.asarray(rng.random(shape) < 0.5)
        else:
            feeds[name] = np.asarray(rng.integers(0, 2, size=shape).astype(dtype.numpy))
    return feeds


@dataclass(frozen=True)
class Draw:
    """One set of inputs of the numeric check, named for the report, and how outputs on it are
    judged (see ``compare``): a stress draw against each row's largest magnitude; an
    ill-conditioned one (rows nearly constant, by design or after a saturating activation) with
    ILL_CONDITIONED_SLACK added to the tolerances, since two careful computations of such rows
    differ by more than the dtype's usual tolerance, and 0/0 may come out as NaN."""

    name: str
    feeds: dict[str, np.ndarray]
    stress: bool = False
    ill_conditioned: bool = False

    def tolerances(self, base: Mapping[DType, Tolerance]) -> dict[DType, Tolerance]:
        if not self.ill_conditioned:
            return dict(base)
        slack = ILL_CONDITIONED_SLACK
        return {d: Tolerance(t.rtol + slack.get(d, 0.0), t.atol + slack.get(d, 0.0)) for d, t in base.items()}


@dataclass(frozen=True)
class Stress:
    """The stress draws' float inputs of one dtype (see ``random_draws``)."""

    large: float  # "large": large * N(0, 1)
    offset: float | None = None  # "offset": offset + spread * N(0, 1); None: the standard-normal values
    spread: float = 1.0


# - offset: rows whose common offset is 1000 (float32) or 10^4 (float64) times their spread. A
#   careful computation of their statistics in the dtype is off by up to about 32 epsilons times
#   that ratio (a mean rounded to the dtype, a sum's rounding), which the draw's tolerance allows
#   (ILL_CONDITIONED_SLACK); a computation that cancels (a variance as E[x^2] - E[x]^2, off by
#   epsilon times the ratio squared) is far outside it. 16-bit inputs get no offset: at their
#   precision any offset worth the name leaves rows that two careful computations disagree on
#   entirely (a mean rounded to fp16).
# - large: magnitudes whose squares come near the top of the dtype's range where it is 16-bit
#   (fp16: 64 * N(0, 1), squares up to about 37000 at three deviations; a larger draw would make
#   a norm spelled out in fp16 overflow where its fused form, accumulating in fp32, does not),
#   float32 and float64 values beyond fp16's range (a computation moved to fp16 overflows); bf16
#   shares float32's range, and its squares must stay finite in float32.
STRESS: dict[DType, Stress] = {
    DType.FLOAT64: Stress(large=1e6, offset=100.0, spread=0.01),
    DType.FLOAT32: Stress(large=1e6, offset=100.0, spread=0.1),
    DType.FLOAT16: Stress(large=64.0),
    DType.BFLOAT16: Stress(large=2.0**40),
}
# The added tolerance of the offset and constant-rows draws: offset rows are ill-conditioned by
# design, and constant rows become nearly constant ones (1 - 6e-8 beside 1 after a saturated tanh)
# whose norm divides rounding differences by sqrt(epsilon) (1e-3). 16-bit outputs are judged on
# their NaN/inf positions only there: their rounding leaves nothing of such rows to compare.
ILL_CONDITIONED_SLACK: dict[DType, float] = {
    DType.FLOAT64: 32 * float(np.finfo(np.float64).eps) * 1e4,
    DType.FLOAT32: 32 * float(np.finfo(np.float32).eps) * 1e3,
    DType.FLOAT16: float("inf"),
    DType.BFLOAT16: float("inf"),
}


def random_draws(specs: Mapping[str, tuple[DType, tuple[int, ...]]], seed: int = 0) -> list[Draw]:
    """The numeric check's inputs: the standard-normal draw (``random_inputs``), then, where some
    input is a float, draws that stress the dtypes: a large common offset, large magnitudes, and
    rows constant along the last axis (small multiples of 1/4, whose sums and means are exact in
    any order, so the statistics of every careful computation are exactly 0). Non-float inputs keep
    the first draw's values."""
    normal = random_inputs(specs, seed)
    draws = [Draw("normal", normal)]
    floats = {name: spec for name, spec in specs.items() if spec[0].is_float}
    if not floats:
        return draws
    rng = np.random.default_rng(seed + 1)
    offset, large, constant = {}, {}, {}
    for name, (dtype, shape) in floats.items():
        stress = STRESS[dtype]
        if stress.offset is not None:
            offset[name] = stress.offset + stress.spread * rng.standard_normal(shape)
        large[name] = stress.large * rng.standard_normal(shape)
        rows = rng.integers(-8, 9, size=shape[:-1] + (1,) if shape else ()) / 4.0
        constant[name] = np.broadcast_to(rows, shape)
    stressed = (("offset", offset, True), ("large", large, False), ("constant rows", constant, True))
    for name, values, ill_conditioned in stressed:
        if values:
            feeds = dict(normal)
            for key, array in values.items():
                feeds[key] = np.asarray(array, order="C").astype(specs[key][0].numpy)
            draws.append(Draw(name, feeds, stress=True, ill_conditioned=ill_conditioned))
    return draws


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
    finite value (a 0/0 that the original's rounding turned into a finite quotient)."""
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
    special_ok = _specials_agree(w, g, ill_conditioned)
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
            else f"max abs error {max_abs:.3g} beyond rtol={tol.rtol}, atol={tol.atol}"
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


def _specials_agree(want: np.ndarray, got: np.ndarray, ill_conditioned: bool) -> bool:
    """NaN where the original has NaN, the same infinity where it has one; unless ill-conditioned,
    nowhere else."""
    special = ~np.isfinite(want)
    if not (np.array_equal(np.isnan(want[special]), np.isnan(got[special]))):
        return False
    if not np.array_equal(want[np.isinf(want)], got[np.isinf(want)]):
        return False
    return ill_conditioned or bool(np.isfinite(got[~special]).all())
