"""Activations applied inside the fused kernels, selected by the integer codes of
``graphopt.fused.table.Activation`` (a runtime argument: one compiled kernel serves them all)."""

import triton
import triton.language as tl

# Codes of graphopt.fused.table.Activation (ABI; kept literal so the kernels import no table).
IDENTITY = tl.constexpr(0)
RELU = tl.constexpr(1)
TANH = tl.constexpr(2)
GELU = tl.constexpr(3)
GELU_TANH = tl.constexpr(4)
SILU = tl.constexpr(5)
SIGMOID = tl.constexpr(6)

SQRT_8_OVER_PI = tl.constexpr(1.5957691216057308)  # 2 * sqrt(2 / pi)
LOG2E = tl.constexpr(1.4426950408889634)

# log2(Phi(-a)) ~ sum(c_i * a^i) on 0 <= a <= 6, Phi the standard normal CDF: a weighted
# least-squares fit (weights a * Phi(-a), i.e. the absolute error it causes in gelu) made for
# this kernel. GELU then needs one exp2 and no erf: the absolute error stays within
# 4e-7 * max(|x|, 1), and there is no branch per element, which keeps 16-bit rows memory-bound.
GELU_CLAMP = tl.constexpr(6.0)
G0 = tl.constexpr(-0.9999995347990571)
G1 = tl.constexpr(-1.1511164039251522)
G2 = tl.constexpr(-0.4591409085130429)
G3 = tl.constexpr(-0.052667952548992016)
G4 = tl.constexpr(0.007287151378520944)
G5 = tl.constexpr(-0.00029674455352371866)
G6 = tl.constexpr(-0.0001231917678706197)
G7 = tl.constexpr(2.6594714028021872e-05)
G8 = tl.constexpr(-1.7970606369611662e-06)


@triton.jit
def _sigmoid(x):
    # exp2 of a large argument gives inf and 1 / inf = 0: both tails are exact without clamping.
    return 1.0 / (1.0 + tl.exp2(x * -LOG2E))


@triton.jit
def _tanh(x):
    # 2 * sigmoid(2x) - 1: one exp2 and one division; its absolute error near 0 is about one ulp
    # of 1.0, well inside what fp32 outputs of a normalized row need.
    return 2.0 / (1.0 + tl.exp2(x * (-2.0 * LOG2E))) - 1.0


@triton.jit
def _gelu(x):
    """x * Phi(x), with Phi(-|x|) = 2^poly(|x|) and Phi(|x|) = 1 - Phi(-|x|): the negative tail
    has no cancellation."""
    a = tl.minimum(tl.abs(x), GELU_CLAMP)
    p = a * G8 + G7
    p = p * a + G6
    p = p * a + G5
    p = p * a + G4
    p = p * a + G3
    p = p * a + G2
    p = p * a + G1
    p = p * a + G0
    tail = tl.exp2(p)
    return x * tl.where(x >= 0.0, 1.0 - tail, tail)


@triton.jit
def apply_activation(x, kind):
    """``x`` is float32; ``kind`` a runtime integer. The branch is uniform across the launch.
    Tensors come first in products with named constants: the interpreter would otherwise wrap
    the product in a constexpr."""
    if kind == RELU:
        x = tl.maximum(x, 0.0)
    elif kind == TANH:
        x = _tanh(x)
    elif kind == GELU:
        x = _gelu(x)
    elif kind == GELU_TANH:
        # 0.5 * (1 + tanh(u)) = sigmoid(2u)
        x = x * _sigmoid((x + x * x * x * 0.044715) * SQRT_8_OVER_PI)
    elif kind == SILU:
        x = x * _sigmoid(x)
    elif kind == SIGMOID:
        x = _sigmoid(x)
    return x
