"""The ahead-of-time build's list of kernels and variants, derived from the fused-op registry: every
op whose folder has a ``triton_kernel.py`` declaring ``AOT_KERNEL`` (or ``AOT_KERNELS``, an op that
launches several kernels), in registry order.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from functools import cache

from graphopt.fused.registry import FUSED_OPS
from graphopt.kernels.kernel_spec import KernelSpec
from graphopt.kernels.launch_rules import DTYPES, Tier


@cache
def kernels() -> tuple[KernelSpec, ...]:
    out = []
    for op in FUSED_OPS:
        name = f"{op.package}.triton_kernel"
        if importlib.util.find_spec(name) is not None:
            module = importlib.import_module(name)
            out.extend(getattr(module, "AOT_KERNELS", None) or (module.AOT_KERNEL,))
    return tuple(out)


@dataclass(frozen=True)
class Variant:
    op: str
    dtype: str
    tier: Tier
    part: str = ""

    @property
    def key(self) -> str:
        return f"{self.op}{'.' + self.part if self.part else ''}/{self.dtype}/{self.tier.name}"

    @property
    def spec(self) -> KernelSpec:
        return next(k for k in kernels() if k.op == self.op and k.part == self.part)


def all_variants() -> list[Variant]:
    """Every compiled variant, in table order: per kernel and dtype, the tiers in rule order."""
    return [
        Variant(k.op, dtype, tier, k.part) for k in kernels() for dtype in DTYPES for tier in k.tiers(dtype)
    ]
