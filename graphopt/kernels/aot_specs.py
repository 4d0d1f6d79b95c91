"""The ahead-of-time build's view of each kernel: its argument list (which is the C++ launcher's
ABI), the hints an aligned variant may assume, and the list of variants to compile.

The argument order here must match the ``@triton.jit`` definitions and
``graphopt/ort/cuda/cuda_launch.cc``; ``check_signature`` verifies the first half at build time.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphopt.fused.group_norm_act.triton_kernel import group_norm_act_kernel, group_norm_act_tiers
from graphopt.kernels.launch_rules import DTYPES, Tier
from graphopt.kernels.norm_act import norm_act_kernel, norm_act_tiers
from graphopt.kernels.norm_act_linear import norm_act_linear_kernel, norm_act_linear_tiers

TRITON_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}

# (name, type) of every runtime argument; "*" is a pointer to the storage dtype.
_NORM_ACT_ARGS = (
    ("X", "*"), ("R", "*"), ("W", "*"), ("B", "*"), ("Y", "*"), ("S", "*"),
    ("rows", "i32"), ("cols", "i32"), ("stride_x", "i64"), ("stride_r", "i64"),
    ("eps", "fp32"), ("norm", "i32"), ("activation", "i32"),
    ("has_scale", "i32"), ("has_bias", "i32"), ("has_residual", "i32"),
)  # fmt: skip
_NORM_ACT_LINEAR_ARGS = (
    ("X", "*"), ("W", "*"), ("B", "*"), ("WL", "*"), ("LB", "*"), ("Y", "*"),
    ("rows", "i32"), ("cols", "i32"), ("out_features", "i32"), ("stride_x", "i64"),
    ("eps", "fp32"), ("norm", "i32"), ("activation", "i32"), ("out_activation", "i32"),
    ("has_scale", "i32"), ("has_bias", "i32"), ("has_linear_bias", "i32"),
)  # fmt: skip

_GROUP_NORM_ACT_ARGS = (
    ("X", "*"), ("R", "*"), ("W", "*"), ("B", "*"), ("Y", "*"), ("S", "*"),
    ("groups", "i32"), ("group_size", "i32"), ("spatial", "i32"),
    ("eps", "fp32"), ("activation", "i32"),
    ("has_scale", "i32"), ("has_bias", "i32"), ("has_residual", "i32"), ("write_sum", "i32"),
)  # fmt: skip


@dataclass(frozen=True)
class KernelSpec:
    op: str  # the fused op's name in graphopt.fused.table
    fn: object  # the @triton.jit function
    args: tuple[tuple[str, str], ...]
    aligned_args: tuple[str, ...]  # 16-byte aligned pointers / multiples of 16 in aligned variants
    tiers: object  # dtype name -> tiers
    constexprs: tuple[str, ...] = ("BLOCK_M", "BLOCK_N", "LOOPED")

    def signature(self, dtype: str) -> dict[str, str]:
        ty = TRITON_DTYPE[dtype]
        sig = {name: (f"*{ty}" if kind == "*" else kind) for name, kind in self.args}
        sig.update({name: "constexpr" for name in self.constexprs})
        return sig

    def constexpr_values(self, tier: Tier) -> dict[str, object]:
        values = {
            "BLOCK_M": tier.block_m,
            "BLOCK_N": tier.block_n,
            "ITERS": tier.iters,
            "LOOPED": tier.looped,
            "EVEN": tier.exact,
        }
        if tier.iters != 1 and "ITERS" not in self.constexprs:
            raise ValueError(f"{self.op} does not take several row blocks per program")
        if tier.exact and "EVEN" not in self.constexprs:
            raise ValueError(f"{self.op} has no exact-width variant")
        return {name: values[name] for name in self.constexprs}

    def attrs(self, aligned: bool) -> dict:
        if not aligned:
            return {}
        names = [name for name, _ in self.args]
        return {(names.index(a),): [["tt.divisibility", 16]] for a in self.aligned_args}

    def check_signature(self) -> None:
        expected = [name for name, _ in self.args] + list(self.constexprs)
        if list(self.fn.arg_names) != expected:
            raise RuntimeError(f"{self.op}: kernel arguments {self.fn.arg_names} != AOT spec {expected}")


KERNELS = (
    KernelSpec(
        "NormAct", norm_act_kernel, _NORM_ACT_ARGS,
        ("X", "R", "W", "B", "Y", "S", "cols", "stride_x", "stride_r"), norm_act_tiers,
        ("BLOCK_M", "BLOCK_N", "ITERS", "LOOPED", "EVEN"),
    ),
    KernelSpec(
        "NormActLinear", norm_act_linear_kernel, _NORM_ACT_LINEAR_ARGS,
        ("X", "W", "B", "WL", "cols", "stride_x"), norm_act_linear_tiers,
    ),
    KernelSpec(
        "GroupNormAct", group_norm_act_kernel, _GROUP_NORM_ACT_ARGS, (), group_norm_act_tiers,
        ("BLOCK_N", "LOOPED"),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class Variant:
    op: str
    dtype: str
    tier: Tier

    @property
    def key(self) -> str:
        return f"{self.op}/{self.dtype}/{self.tier.name}"

    @property
    def spec(self) -> KernelSpec:
        return next(k for k in KERNELS if k.op == self.op)


def all_variants() -> list[Variant]:
    """Every compiled variant, in table order: per op and dtype, the tiers in rule order."""
    return [Variant(k.op, dtype, tier) for k in KERNELS for dtype in DTYPES for tier in k.tiers(dtype)]
