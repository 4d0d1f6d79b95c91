"""When a constant may stand for a number in a rule: a one-element tensor that broadcasting leaves
as a scalar, holding exactly the number the rule means.

A ``[1, 1, 1]`` tensor of ones is not the scalar 1: added to a ``[N, D]`` value it makes the result
``[1, N, D]``, and a rule that takes it for a scalar would drop that rank. And ``Pow(x, 2.0000005)``
is not a square.
"""

from __future__ import annotations

import math

import ml_dtypes

from ..ir import DType, Node, Value, constant_of


def scalar_operand(value: Value | None, reader: Node) -> float | int | None:
    """The number held by ``value``, a one-element constant input of ``reader``, where broadcasting it
    leaves ``reader``'s output the shape its other inputs give it; else None."""
    tensor = constant_of(value) if value is not None else None
    if tensor is None or math.prod(tensor.shape) != 1:
        return None
    if tensor.shape and not _ranks_cover(reader, value, len(tensor.shape)):
        return None
    return tensor.scalar()


def _ranks_cover(reader: Node, value: Value, rank: int) -> bool:
    """Whether some other input of ``reader`` has at least ``rank`` dims (so the size-1 dims of
    ``value`` broadcast into existing ones, adding none)."""
    ranks = [v.rank for v in reader.inputs if v is not None and v is not value]
    return any(r is not None and r >= rank for r in ranks)


def holds_number(found: float | int, number: float, dtype: DType) -> bool:
    """Whether a constant of ``dtype`` holding ``found`` is the literal ``number``: exactly, where
    ``number`` is exact in that dtype (0.5, 1, 2, 3); else up to one rounding of it (0.044715)."""
    if found == number:
        return True
    if not dtype.is_float:
        return False
    stored = float(dtype.numpy.type(number))
    if stored == number:
        return False  # exact in this dtype, and the constant holds something else
    return math.isclose(found, number, rel_tol=float(ml_dtypes.finfo(dtype.numpy).eps), abs_tol=0.0)
