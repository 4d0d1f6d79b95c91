"""recognize_activations: activations that exporters spell out in elementwise ops become one op.

* GELU: ``x * 0.5 * (1 + erf(x / √2))`` in the orders the exporters write it (and ``x * (1/√2)``);
* GELU, tanh approximation: ``0.5 * x * (1 + tanh(√(2/π) * (x + 0.044715 * x³)))``, and with the
  polynomial factored, ``tanh(√(2/π) * x * (1 + 0.044715 * x * x))`` (BLOOM's GELU, transformers'
  ``gelu_fast``);
* SiLU: ``x * sigmoid(x)``.
"""

from __future__ import annotations

import itertools
import math

from graphopt.ir import DType, Op, constant_of
from graphopt.rewrite import Either, Fail, Rule, op, rewrite_pass
from graphopt.rewrite.scalars import scalar_operand

from .origin import note_origin

SQRT2 = math.sqrt(2.0)
TANH_SCALE = math.sqrt(2.0 / math.pi)


# How closely a constant stored in each dtype can match the exact value.
_PRECISION = {DType.FLOAT16: 2e-3, DType.BFLOAT16: 1e-2}


def _close(value, target: float, reader) -> bool:
    """Whether ``value`` is a constant near ``target`` that acts as a scalar where ``reader`` reads it."""
    scalar = scalar_operand(value, reader)
    dtype = constant_of(value).dtype if scalar is not None else None
    return scalar is not None and math.isclose(scalar, target, rel_tol=_PRECISION.get(dtype, 1e-4))


def _erf_part(x, c, cube=None):
    scaled = op.any_of(Op.DIV, Op.MUL)(x, c).named("scaled")
    return op.add(op.erf(scaled), 1.0)


def _tanh_part(x, k, cube):
    inner = op.add(x, op.mul(cube(x), 0.044715))
    return op.add(op.tanh(op.mul(inner, k).named("scaled")), 1.0)


def _square_term(x):
    """0.044715 * x²: how the factored form writes it."""
    return Either(
        "square",
        cx_x=op.mul(op.mul(x, 0.044715), x),
        xx_c=op.mul(op.mul(x, x), 0.044715),
        pow=op.mul(op.pow(x, 2.0), 0.044715),
    )


def _tanh_factored_part(x, k, cube=None):
    scaled = op.mul(x, k).named("scaled")
    return op.add(op.tanh(op.mul(scaled, op.add(_square_term(x), 1.0))), 1.0)


# Where the 0.5 sits: (x * 0.5) * p, (x * p) * 0.5, x * (p * 0.5).
_HALF_FORMS = {
    "half_first": lambda x, p: op.mul(op.mul(x, 0.5), p),
    "half_last": lambda x, p: op.mul(op.mul(x, p), 0.5),
    "half_inner": lambda x, p: op.mul(x, op.mul(p, 0.5)),
}
# How x³ is written.
_CUBES = {
    "pow": lambda x: op.pow(x, 3.0),
    "mul_inner": lambda x: op.mul(x, op.mul(x, x)),
    "mul_outer": lambda x: op.mul(op.mul(x, x), x),
}


def _gelu_pattern(half, part, cube=None):
    def pattern(x, c):
        return half(x, part(x, c, cube))

    return pattern


def check_erf(match):
    scaled = match.node("scaled")
    want = SQRT2 if scaled.op == Op.DIV else 1.0 / SQRT2
    if not _close(match["c"], want, scaled):
        return Fail(f"{match['c'].name!r} is not the scalar {want:.6g}, so this is not GELU")
    return match


def check_tanh(match):
    if not _close(match["c"], TANH_SCALE, match.node("scaled")):
        return Fail(f"{match['c'].name!r} is not the scalar √(2/π), so this is not tanh-approximated GELU")
    return match


def silu_pattern(x):
    return op.mul(x, op.sigmoid(x))


def replace_gelu(b, match):
    return b.gelu(match["x"], approximate="none")


def replace_gelu_tanh(b, match):
    return b.gelu(match["x"], approximate="tanh")


def replace_silu(b, match):
    return b.silu(match["x"])


def _float(match):
    x = match["x"]
    return match if x.dtype is not None and x.dtype.is_float else None


def _erf_rules():
    check = lambda m: _float(m) and check_erf(m)  # noqa: E731
    for name, half in _HALF_FORMS.items():
        yield Rule(f"gelu_from_erf[{name}]", _gelu_pattern(half, _erf_part), replace_gelu, check)


def _tanh_rules():
    for (name, half), (cube_name, cube) in itertools.product(_HALF_FORMS.items(), _CUBES.items()):
        pattern = _gelu_pattern(half, _tanh_part, cube)
        check = lambda m: _float(m) and check_tanh(m)  # noqa: E731
        yield Rule(f"gelu_tanh_from_ops[{name},{cube_name}]", pattern, replace_gelu_tanh, check)
    for name, half in _HALF_FORMS.items():
        pattern = _gelu_pattern(half, _tanh_factored_part)
        check = lambda m: _float(m) and check_tanh(m)  # noqa: E731
        yield Rule(f"gelu_tanh_from_ops[{name},factored_{{square}}]", pattern, replace_gelu_tanh, check)


PASS = rewrite_pass(
    "recognize_activations",
    "Turn elementwise spellings of GELU (erf and tanh forms) and SiLU into single ops.",
    [*_erf_rules(), *_tanh_rules(), Rule("silu_from_sigmoid", silu_pattern, replace_silu, _float)],
    on_rewrite=note_origin,
)
