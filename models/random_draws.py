"""Inputs the random programs are checked on beyond the numeric check's own draws (which stress the
dtypes with a large common offset, large magnitudes and constant rows; graphopt/verification/draws.py):
the standard-normal inputs with NaN, +inf or -inf in one of every three rows (last axis) of each
float input. Judged strictly: NaN and infinities exactly where the original has them, and the finite
values within the usual tolerances (a kernel that drops a NaN, as a max with 0 does, fails here).

(Magnitudes at a dtype's very top are not drawn: there every sum or square overflows somewhere, and
where depends on how a kernel computes. ONNX Runtime's LayerNormalization takes E[x^2] - E[x]^2 and
gives inf - inf, NaN, where the spelled-out norm it replaces divides by an infinite deviation and
gives 0, and the float64 answer is neither; a judgement that lets such outputs differ also lets a
computation moved into float16 pass, which is what such a draw would be for. The check's "large"
draw stays below the magnitudes whose squares overflow, for that reason.)
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from graphopt.ir import DType
from graphopt.verification.draws import Draw, random_inputs

SPECIALS = (np.nan, np.inf, -np.inf)


def adversarial_draws(specs: Mapping[str, tuple[DType, tuple[int, ...]]], seed: int = 0) -> list[Draw]:
    """The "non-finite" draw for inputs of ``specs`` (none without a float input); non-float inputs
    keep the standard-normal draw's values."""
    normal = random_inputs(specs, seed)
    floats = [name for name, (dtype, _) in specs.items() if dtype.is_float]
    if not floats:
        return []
    rng = np.random.default_rng([seed, 7])
    return [Draw("non-finite", {**normal, **{name: _with_specials(normal[name], rng) for name in floats}})]


def _with_specials(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A copy of ``values`` with NaN, +inf or -inf at one random place in one of every three rows
    (the last axis), cycling through the three."""
    out = np.array(values, copy=True)
    if out.size == 0:
        return out
    if out.ndim == 0:
        out[()] = SPECIALS[rng.integers(3)]
        return out
    rows = out.reshape(-1, out.shape[-1])
    for count, row in enumerate(range(0, rows.shape[0], 3)):
        rows[row, rng.integers(rows.shape[1])] = SPECIALS[count % 3]
    return out
