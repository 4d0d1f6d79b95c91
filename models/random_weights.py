"""The constants of a random program, drawn in the order an emitter asks for them, so the ONNX and
the torch form of one program hold the same numbers."""

from __future__ import annotations

import numpy as np

from models.random_program import Program


class Weights:
    def __init__(self, program: Program):
        self.rng = np.random.default_rng(program.seed)
        self.dtype = np.dtype(program.dtype)

    def vector(self, size: int, center: float = 0.0) -> np.ndarray:
        return (center + 0.25 * self.rng.standard_normal(size)).astype(self.dtype)

    def scalar(self, away_from_zero: bool = False) -> float:
        value = float(self.rng.uniform(0.5, 2.0))
        if not away_from_zero and self.rng.random() < 0.5:
            value = -value
        return value

    def matrix(self, rows: int, cols: int) -> np.ndarray:
        # Scaled so that activations keep their size however many layers follow.
        return (self.rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(self.dtype)
