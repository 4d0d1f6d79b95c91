"""recognize_activations: activations that exporters spell out in elementwise ops become one op.

* GELU: ``x * 0.5 * (1 + erf(x / √2))`` in the orders the exporters write it (and ``x * (1/√2)``);
* GELU, tanh approximation: ``0.5 * x * (1 + tanh(√(2/π) * (x + 0.044715 * x³)))``;
* SiLU: ``x * sigmoid(x)``.
"""

from __future__ import annotations

import math

from graphopt.ir import Op, constant_of
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

SQRT2 = math.sqrt(2.0)
TANH_SCALE = math.sqrt(2.0 / math.pi)


def _close(value, target: float, rel: float = 1e-4) -> bool:
    tensor = constant_of(value) if value is not None else None
    scalar = tensor.scalar() if tensor is not None else None
    return scalar is not None and math.isclose(scalar, target, rel_tol=rel)


def _erf_part(x, c):
    scaled = op.any_of(Op.DIV, Op.MUL)(x, c).named("scaled")
    return op.add(op.erf(scaled), 1.0)


def gelu_half_first(x, c):
    return op.mul(op.mul(x, 0.5), _erf_part(x, c))


def gelu_half_last(x, c):
    return op.mul(op.mul(x, _erf_part(x, c)), 0.5)


def gelu_half_inner(x, c):
    return op.mul(x, op.mul(_erf_part(x, c), 0.5))


def check_erf(match):
    scaled = match.node("scaled")
    want = SQRT2 if scaled.op == Op.DIV else 1.0 / SQRT2
    if not _close(match["c"], want):
        return Fail(f"{match['c'].name!r} is not {want:.6g}, so this is not GELU")
    return match


def _cube(x):
    return op.mul(x, op.mul(x, x))


def _tanh_part(x, k, cube):
    inner = op.add(x, op.mul(cube, 0.044715))
    return op.add(op.tanh(op.mul(inner, k)), 1.0)


def gelu_tanh_mul_cube(x, k):
    return op.mul(op.mul(x, _tanh_part(x, k, _cube(x))), 0.5)


def gelu_tanh_pow_cube(x, k):
    return op.mul(op.mul(x, _tanh_part(x, k, op.pow(x, 3.0))), 0.5)


def gelu_tanh_half_first(x, k):
    return op.mul(op.mul(x, 0.5), _tanh_part(x, k, op.pow(x, 3.0)))


def check_tanh(match):
    if not _close(match["k"], TANH_SCALE):
        return Fail(f"{match['k'].name!r} is not √(2/π), so this is not tanh-approximated GELU")
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


def _erf_rule(name, pattern):
    return Rule(name, pattern, replace_gelu, lambda m: _float(m) and check_erf(m))


def _tanh_rule(name, pattern):
    return Rule(name, pattern, replace_gelu_tanh, lambda m: _float(m) and check_tanh(m))


PASS = rewrite_pass(
    "recognize_activations",
    "Turn elementwise spellings of GELU (erf and tanh forms) and SiLU into single ops.",
    [
        _erf_rule("gelu_from_erf", gelu_half_first),
        _erf_rule("gelu_from_erf_half_last", gelu_half_last),
        _erf_rule("gelu_from_erf_half_inner", gelu_half_inner),
        _tanh_rule("gelu_tanh_from_ops", gelu_tanh_mul_cube),
        _tanh_rule("gelu_tanh_from_ops_pow", gelu_tanh_pow_cube),
        _tanh_rule("gelu_tanh_from_ops_half_first", gelu_tanh_half_first),
        Rule("silu_from_sigmoid", silu_pattern, replace_silu, _float),
    ],
)
