"""The numeric check's inputs: a standard-normal draw, and draws that stress the dtypes (a large
common offset, large magnitudes, constant rows), each with how outputs on it are judged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..ir import DType
from .numeric import Tolerance


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
# - large: magnitudes far beyond the standard normal. fp16: 16 * N(0, 1), whose squares stay below
#   fp16's top even after a program scales them by a few: a norm spelled out in fp16 (torch runs
#   x * x in fp16) would otherwise overflow where its fused form, accumulating in fp32, does not,
#   and the check would refuse a correct fusion. Float32 and float64: values beyond fp16's range (a
#   computation moved to fp16 overflows). bf16 shares float32's range, and its squares must stay
#   finite in float32.
STRESS: dict[DType, Stress] = {
    DType.FLOAT64: Stress(large=1e6, offset=100.0, spread=0.01),
    DType.FLOAT32: Stress(large=1e6, offset=100.0, spread=0.1),
    DType.FLOAT16: Stress(large=16.0),
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


# What the draws of one check may take in all: every draw holds each input, and drawing a float input
# takes a float64 array of its size besides. (A damaged file declaring a dim of 10^9 asked for 14 GB
# and 80 s of drawing before anything said no.) The seed at N = 512 (a 512 MiB input) takes 3 GiB.
MAX_DRAWS_BYTES = 4 << 30


def draws_bytes(specs: Mapping[str, tuple[DType, tuple[int, ...]]]) -> int:
    """The memory ``random_draws`` would take for ``specs``, computed without allocating."""
    sizes = {name: int(np.prod(shape, dtype=np.float64)) for name, (_, shape) in specs.items()}
    floats = [name for name, (dtype, _) in specs.items() if dtype.is_float]
    count = 1 + len(_stress_kinds({name: specs[name][0] for name in floats}))
    stored = count * sum(sizes[name] * dtype.itemsize for name, (dtype, _) in specs.items())
    return stored + 8 * max((sizes[name] for name in floats), default=0)


def _stress_kinds(float_dtypes: Mapping[str, DType]) -> list[str]:
    """The stress draws made for inputs of these float dtypes (see ``random_draws``)."""
    if not float_dtypes:
        return []
    offset = any(STRESS[dtype].offset is not None for dtype in float_dtypes.values())
    return ["offset"] * offset + ["large", "constant rows"]


def random_draws(specs: Mapping[str, tuple[DType, tuple[int, ...]]], seed: int = 0) -> list[Draw]:
    """The numeric check's inputs: the standard-normal draw (``random_inputs``), then, where some
    input is a float, draws that stress the dtypes: a large common offset, large magnitudes, and
    rows constant along the last axis (small multiples of 1/4, whose sums and means are exact in
    any order, so the statistics of every careful computation are exactly 0). Non-float inputs keep
    the first draw's values. ValueError, before anything is allocated, where they would take more
    than MAX_DRAWS_BYTES."""
    needed = draws_bytes(specs)
    if needed > MAX_DRAWS_BYTES:
        described = ", ".join(f"{name}: {dtype.name}{list(shape)}" for name, (dtype, shape) in specs.items())
        raise ValueError(
            f"the numeric check's random inputs would take {needed / 2**30:.1f} GiB ({described}; at most "
            f"{MAX_DRAWS_BYTES >> 30} GiB); give smaller sizes with --input-shape, real inputs with "
            "--inputs, or skip the check with --no-verify"
        )
    normal = random_inputs(specs, seed)
    draws = [Draw("normal", normal)]
    floats = {name: spec for name, spec in specs.items() if spec[0].is_float}
    if not floats:
        return draws
    rng = np.random.default_rng(seed + 1)
    offset, large, constant = {}, {}, {}
    for name, (dtype, shape) in floats.items():
        # Each float64 array is stored in the input's dtype as soon as it is drawn, so that one at a
        # time exists (``draws_bytes``).
        stress = STRESS[dtype]
        if stress.offset is not None:
            offset[name] = (stress.offset + stress.spread * rng.standard_normal(shape)).astype(dtype.numpy)
        large[name] = (stress.large * rng.standard_normal(shape)).astype(dtype.numpy)
        rows = rng.integers(-8, 9, size=shape[:-1] + (1,) if shape else ()) / 4.0
        constant[name] = np.asarray(np.broadcast_to(rows, shape), order="C").astype(dtype.numpy)
    stressed = (("offset", offset, True), ("large", large, False), ("constant rows", constant, True))
    for name, values, ill_conditioned in stressed:
        if values:
            draws.append(Draw(name, {**normal, **values}, stress=True, ill_conditioned=ill_conditioned))
    return draws
