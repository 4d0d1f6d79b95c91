"""Derives the GELU polynomials of graphopt/kernels/activations.py for 16-bit results, and the CPU
kernels' float one (graphopt/ort/src/vector_math.h, degree 10).

GELU(x) = x * Phi(x), with Phi(-a) = 2^p(a) on 0 <= a <= 6. A fit of log2(Phi(-a)) that is minimax
in the log2 domain makes the error relative, in the far negative tail too (an error d in p is a
factor 2^d on the result). Lawson's iteration (a least-squares fit, reweighted by each point's
error) approaches the minimax fit. Prints each degree's coefficients and the error it gives GELU
(coefficients rounded to fp32, as the kernels hold them):

    python bench/fit_gelu_tail.py [--degrees 5 6]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

CLAMP = 6.0


def phi_minus(a: np.ndarray) -> np.ndarray:
    """Phi(-a), the standard normal CDF's lower tail, in float64."""
    return np.array([0.5 * math.erfc(v / math.sqrt(2.0)) for v in a])


def fit(degree: int, points: int = 30001, rounds: int = 200) -> tuple[np.ndarray, float]:
    a = np.linspace(0.0, CLAMP, points)
    target = np.log2(phi_minus(a))
    weights = np.ones_like(a)
    for _ in range(rounds):
        coefficients = np.polynomial.polynomial.polyfit(a, target, degree, w=np.sqrt(weights))
        error = np.polynomial.polynomial.polyval(a, coefficients) - target
        weights = weights * np.abs(error) + 1e-300
        weights /= weights.sum()
    return coefficients, float(np.abs(error).max())


def gelu_errors(coefficients: np.ndarray) -> tuple[float, float]:
    """(max relative error for |x| <= 6, max |error| / max(|x|, 1)) of the kernels' GELU formula."""
    c32 = coefficients.astype(np.float32).astype(np.float64)
    x = np.linspace(-CLAMP, CLAMP, 240001)
    x = x[x != 0.0]
    tail = 2.0 ** np.polynomial.polynomial.polyval(np.minimum(np.abs(x), CLAMP), c32)
    approx = x * np.where(x >= 0.0, 1.0 - tail, tail)
    exact = x * (1.0 - phi_minus(x))
    difference = np.abs(approx - exact)
    return float((difference / np.abs(exact)).max()), float((difference / np.maximum(np.abs(x), 1.0)).max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--degrees", type=int, nargs="+", default=[5, 6])
    args = parser.parse_args(argv)
    for degree in args.degrees:
        coefficients, log2_error = fit(degree)
        relative, absolute = gelu_errors(coefficients)
        print(f"degree {degree}: max error {log2_error:.2e} in log2(Phi(-a)); GELU: relative {relative:.2e}, "
              f"absolute / max(|x|, 1) {absolute:.2e}")  # fmt: skip
        for i, c in enumerate(coefficients):
            print(f"    c{i} = {float(c)!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
