"""Single PTX instructions that Triton does not emit by itself, for the 16-bit kernels.

Each has a plain-Triton twin that computes the same value the slow way: Triton's interpreter
(``TRITON_INTERPRET=1``, how the kernels are tested without a GPU) runs no PTX, so under it the
twins stand in. The instructions themselves are checked on a GPU, where tests/kernels,
tests/fused/test_torch_triton.py and tests/ort/test_ort_cuda.py compare bf16 results with a float64
reference.

- ``bf16_to_f32``: two bf16 in one 32-bit register widen with one shift (low half) and one AND
  (high half); the compiler spends a byte permute and a shift on each high half. At 2 bytes per
  element, NormAct on bf16 rows is bound by instructions as much as by memory, and this is 1.5%
  of its time at D = 1024 (bench/results/short_rows_lean.json).
- ``tanh_approx``: the hardware tanh (``tanh.approx.f32``, relative error below 2^-10.9), one
  instruction instead of an exp2, a reciprocal and three more. Used only where the result is
  stored as bf16, whose own rounding error (up to 2^-8 relative) is seven times larger.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

if INTERPRETED:

    @triton.jit
    def bf16_to_f32(v):
        return v.to(tl.float32)

    @triton.jit
    def tanh_approx(x):
        return 2.0 / (1.0 + tl.exp2(x * -2.8853900817779268)) - 1.0  # 2 * sigmoid(2x) - 1

else:

    @triton.jit
    def bf16_to_f32(v):
        # pack=2: each asm instance gets two neighbouring bf16 in $2 and writes two floats.
        return tl.inline_asm_elementwise(
            "{ shl.b32 $0, $2, 16; and.b32 $1, $2, 0xffff0000; }",
            "=r,=r,r", [v], dtype=tl.float32, is_pure=True, pack=2,
        )  # fmt: skip

    @triton.jit
    def tanh_approx(x):
        return tl.inline_asm_elementwise(
            "tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
        )


@triton.jit
def widen(v):
    """A loaded tensor as fp32 (fp32 as it is)."""
    if v.dtype == tl.bfloat16:
        return bf16_to_f32(v)
    else:
        return v.to(tl.float32)
