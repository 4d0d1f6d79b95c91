"""Rounding a float64 result as storing it in the model's narrower dtype does: exactly (round to
nearest), or with noise, for the float64 evaluations of the numeric check's second opinion
(``graphopt.verification.float64_check``).

Evaluations come in modes: ``EXACT`` rounds nothing (the answer exact arithmetic gives), ``STORED``
rounds each value once to its dtype (what ONNX and aten semantics say the model computes), and the
noisy modes 1..NOISY perturb each value by up to one unit roundoff of its dtype before rounding it
(Monte Carlo arithmetic): kernels round more than once inside an op (a sum of many terms), and where
an output is ill-conditioned, how far such legitimate roundings move it is the uncertainty that any
computation of the model in its own dtypes has. Only values an op computes get noise: a constant, a
fill or a copy of given values (``MAKES_VALUES``, ``ONNX_MAKES_VALUES``) is what it is in every
computation of the model (Swin builds its window mask from counts it fills into slices and compares
with 0: with noise on the fills, whole windows flipped between masked and not, and the noisy
evaluations of the original strayed so far from the exact answer that the second opinion would have
passed almost anything), and so is a conversion, rounded once to nearest in every runtime.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

EXACT = -1
STORED = 0
NOISY = 8
MODES = (EXACT, STORED, *range(1, NOISY + 1))


# aten ops (by their packet name) and ONNX ops that make values rather than compute them: constants,
# fills and copies of given values. (Noise on ops that only move values, a reshape or a gather, stays:
# the second opinion's passes of ill-conditioned norms on rows equal to a few ulps rest on it.)
MAKES_VALUES = frozenset(
    {"lift_fresh_copy", "zeros", "ones", "full", "empty", "scalar_tensor", "new_zeros", "new_ones",
     "new_full", "new_empty", "zeros_like", "ones_like", "full_like", "empty_like", "fill_", "fill",
     "copy_", *("_to_copy", "to")}
)  # fmt: skip
ONNX_MAKES_VALUES = frozenset({"Constant", "ConstantOfShape", "Cast", "CastLike"})
# (A conversion is here too: it rounds once, to nearest, in every runtime, which STORED already does.
# With noise, a Range's step of Cast(1) became 0.99999994 and the range one element longer.)


def store(values: np.ndarray, dtype: np.dtype, mode: int, where: int, computed: bool = True) -> np.ndarray:
    """``values`` (float64) as stored in ``dtype`` under ``mode``, as float64; ``where`` numbers the
    value in its program, so that each gets its own noise, the same in every run of a mode;
    ``computed``: an op computed it (else it is only rounded, in every mode but EXACT)."""
    if mode == EXACT or np.dtype(dtype) == np.float64:
        return values
    values = np.asarray(values, dtype=np.float64)
    if mode != STORED and computed:
        rng = np.random.default_rng([mode, where])
        roundoff = float(ml_dtypes.finfo(dtype).eps) / 2
        values = values * (1.0 + rng.uniform(-roundoff, roundoff, size=values.shape))
    with np.errstate(over="ignore", invalid="ignore"):  # (beyond the dtype's top it is infinite, as stored)
        return values.astype(dtype).astype(np.float64)
