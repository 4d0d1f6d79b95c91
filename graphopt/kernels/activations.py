"""Activations applied inside the fused kernels, selected by the integer codes of
``graphopt.fused.spec.Activation`` (a runtime argument: one compiled kernel serves them all).

The formula depends on the dtype the result is stored in. fp32 results get accurate forms (errors
of a few 1e-7); 16-bit results get cheaper approximations whose error stays under a quarter of
that dtype's own rounding (half an ulp: 2^-11 relative for fp16, 2^-8 for bf16), so rounding still
decides the stored value, while 16-bit rows, which are bound by instructions as much as by memory,
spend fewer of them (bench/results/short_rows_lean.json: on bf16 rows of 1024 the hardware tanh takes
6% off NormAct's time, the shorter GELU fits 2-3%).
"""

import triton
import triton.language as tl

from graphopt.kernels.ptx import tanh_approx

# Codes of graphopt.fused.spec.Activation (ABI; kept literal so the kernels import no table).
IDENTITY = tl.constexpr(0)
RELU = tl.constexpr(1)
TANH = tl.constexpr(2)
GELU = tl.constexpr(3)
GELU_TANH = tl.constexpr(4)
SILU = tl.constexpr(5)
SIGMOID = tl.constexpr(6)

SQRT_8_OVER_PI = tl.constexpr(1.5957691216057308)  # 2 * sqrt(2 / pi)
LOG2E = tl.constexpr(1.4426950408889634)

# GELU(x) = x * Phi(x), Phi the standard normal CDF, with Phi(-a) = 2^p(a) for a = min(|x|, 6) and
# p a polynomial fitted on 0 <= a <= 6: one exp2 and no erf, and no branch per element.
GELU_CLAMP = tl.constexpr(6.0)
# fp32: degree 8, a least-squares fit weighted by a * Phi(-a) (the absolute error it causes in
# gelu): within 4e-7 * max(|x|, 1).
G0 = tl.constexpr(-0.9999995347990571)
G1 = tl.constexpr(-1.1511164039251522)
G2 = tl.constexpr(-0.4591409085130429)
G3 = tl.constexpr(-0.052667952548992016)
G4 = tl.constexpr(0.007287151378520944)
G5 = tl.constexpr(-0.00029674455352371866)
G6 = tl.constexpr(-0.0001231917678706197)
G7 = tl.constexpr(2.6594714028021872e-05)
G8 = tl.constexpr(-1.7970606369611662e-06)
# fp16: degree 6, minimax in the log2 domain (so the error is relative, in the tails too):
# 4.5e-5 relative at most. bench/fit_gelu_tail.py derives this fit and the next.
H0 = tl.constexpr(-1.0000648615746943)
H1 = tl.constexpr(-1.1501739758712115)
H2 = tl.constexpr(-0.46127222189497835)
H3 = tl.constexpr(-0.05118521020501892)
H4 = tl.constexpr(0.0071955423038163645)
H5 = tl.constexpr(-0.0006110984965796527)
H6 = tl.constexpr(2.2990061716564397e-05)
# bf16: degree 5, likewise: 3.7e-4 relative at most.
B0 = tl.constexpr(-1.0005324421656625)
B1 = tl.constexpr(-1.1443978675262094)
B2 = tl.constexpr(-0.47278707125111036)
B3 = tl.constexpr(-0.04283234427003204)
B4 = tl.constexpr(0.004467566040376815)
B5 = tl.constexpr(-0.00020168354534858313)


@triton.jit
def _sigmoid(x):
    # exp2 of a large argument gives inf and 1 / inf = 0: both tails are exact without clamping.
    return 1.0 / (1.0 + tl.exp2(x * -LOG2E))


@triton.jit
def _tanh(x):
    # 2 * sigmoid(2x) - 1: one exp2 and one division; its absolute error is a few ulps of 1.0 at
    # most (two on a GPU, whose exp2 and division are approximate), well inside what fp32 outputs
    # of a normalized row need.
    return 2.0 / (1.0 + tl.exp2(x * (-2.0 * LOG2E))) - 1.0


@triton.jit
def _gelu(x, tail):
    """x * Phi(x) from tail = Phi(-|x|) (fitted for |x| <= GELU_CLAMP): Phi(|x|) = 1 - tail, so the
    negative side has no cancellation. Below -GELU_CLAMP the factor is 0, as Phi(x) is to 6e-9: x *
    Phi(-6) would make -1e21 of -1e30 and -inf of -inf, where x * Phi(x) is -0 and NaN (-inf * 0),
    as torch and ONNX Runtime give. (NaN fails both comparisons: NaN * 0 stays NaN.)"""
    return x * tl.where(x >= 0.0, 1.0 - tail, tl.where(x >= -GELU_CLAMP, tail, 0.0))


@triton.jit
def _gelu_fp32(x):
    a = tl.minimum(tl.abs(x), GELU_CLAMP)
    p = a * G8 + G7
    p = p * a + G6
    p = p * a + G5
    p = p * a + G4
    p = p * a + G3
    p = p * a + G2
    p = p * a + G1
    p = p * a + G0
    return _gelu(x, tl.exp2(p))


@triton.jit
def _gelu_fp16(x):
    a = tl.minimum(tl.abs(x), GELU_CLAMP)
    p = a * H6 + H5
    p = p * a + H4
    p = p * a + H3
    p = p * a + H2
    p = p * a + H1
    p = p * a + H0
    return _gelu(x, tl.exp2(p))


@triton.jit
def _gelu_bf16(x):
    a = tl.minimum(tl.abs(x), GELU_CLAMP)
    p = a * B5 + B4
    p = p * a + B3
    p = p * a + B2
    p = p * a + B1
    p = p * a + B0
    return _gelu(x, tl.exp2(p))


@triton.jit
def apply_activation(x, kind, storage: tl.constexpr):
    """``x`` is float32; ``kind`` a runtime integer (the branch is uniform across the launch);
    ``storage`` the dtype the result will be stored in. Tensors come first in products with named
    constants: the interpreter would otherwise wrap the product in a constexpr."""
    if kind == RELU:
        # a select, not tl.maximum (which drops NaN): NaN stays NaN, as torch.relu and ONNX Relu give
        x = tl.where(x < 0.0, 0.0, x)
    elif kind == TANH:
        x = tanh_approx(x) if storage == tl.bfloat16 else _tanh(x)
    elif kind == GELU:
        if storage == tl.bfloat16:
            x = _gelu_bf16(x)
        elif storage == tl.float16:
            x = _gelu_fp16(x)
        else:
            x = _gelu_fp32(x)
    elif kind == GELU_TANH:
        # 0.5 * (1 + tanh(u)) = sigmoid(2u)
        x = x * _sigmoid((x + x * x * x * 0.044715) * SQRT_8_OVER_PI)
    elif kind == SILU:
        x = x * _sigmoid(x)
    elif kind == SIGMOID:
        x = _sigmoid(x)
    return x
