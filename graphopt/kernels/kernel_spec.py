"""A Triton kernel as the ahead-of-time build sees it: its argument list (which is the C++
launcher's ABI), the hints an aligned variant may assume, and its tiers.

Each fused op's ``triton_kernel.py`` declares its ``AOT_KERNEL`` (an op that launches several kernels:
``AOT_KERNELS``, each with its own ``part`` name); the argument order there must match its
``@triton.jit`` definition and its C++ launch (``cuda_launch.cc`` in the op's folder);
``check_signature`` verifies the first half at build time.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphopt.kernels.launch_rules import Tier

TRITON_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


@dataclass(frozen=True)
class KernelSpec:
    op: str  # the fused op's name (its spec's ``name``)
    fn: object  # the @triton.jit function
    args: tuple[tuple[str, str], ...]
    aligned_args: tuple[str, ...]  # 16-byte aligned pointers / multiples of 16 in aligned variants
    tiers: object  # dtype name -> tiers
    constexprs: tuple[str, ...] = ("BLOCK_M", "BLOCK_N", "LOOPED")
    # Which of its op's kernels this is, where an op launches several ("" for an op's only or main
    # kernel): the C++ launch selects a variant by op and part.
    part: str = ""
    # Constants every variant of this spec compiles in, after the tier's (name, value): a kernel built
    # twice with a code path fixed each way, as two parts the launches choose between.
    fixed: tuple[tuple[str, object], ...] = ()

    def signature(self, dtype: str) -> dict[str, str]:
        ty = TRITON_DTYPE[dtype]
        sig = {name: (f"*{ty}" if kind == "*" else kind) for name, kind in self.args}
        sig.update({name: "constexpr" for name in self.constexprs})
        sig.update({name: "constexpr" for name, _ in self.fixed})
        return sig

    def constexpr_values(self, tier: Tier) -> dict[str, object]:
        values = {
            "BLOCK_M": tier.block_m,
            "BLOCK_N": tier.block_n,
            "ITERS": tier.iters,
            "LOOPED": tier.looped,
            "EVEN": tier.exact,
            "BLOCK_C": tier.max_chunks,
            "SHARED": tier.shared,
            "BLOCKWISE": tier.blockwise,
            "TAIL_N": tier.tail,
            "OUT_FEATURES": tier.out_features,
        }
        if tier.iters != 1 and "ITERS" not in self.constexprs:
            raise ValueError(f"{self.op} does not take several row blocks per program")
        if tier.exact and "EVEN" not in self.constexprs:
            raise ValueError(f"{self.op} has no exact-width variant")
        if tier.shared and "SHARED" not in self.constexprs:
            raise ValueError(f"{self.op} has no shared-operand variant")
        if tier.tail and "TAIL_N" not in self.constexprs:
            raise ValueError(f"{self.op} has no two-tile variant")
        if tier.blockwise and "BLOCKWISE" not in self.constexprs:
            raise ValueError(f"{self.op} has no blockwise-operand variant")
        if tier.out_features and "OUT_FEATURES" not in self.constexprs:
            raise ValueError(f"{self.op} has no fixed-output-count variant")
        return {name: values[name] for name in self.constexprs} | dict(self.fixed)

    def attrs(self, aligned: bool) -> dict:
        if not aligned:
            return {}
        names = [name for name, _ in self.args]
        return {(names.index(a),): [["tt.divisibility", 16]] for a in self.aligned_args}

    def check_signature(self) -> None:
        expected = [name for name, _ in self.args] + list(self.constexprs) + [name for name, _ in self.fixed]
        if list(self.fn.arg_names) != expected:
            raise RuntimeError(f"{self.op}: kernel arguments {self.fn.arg_names} != AOT spec {expected}")
