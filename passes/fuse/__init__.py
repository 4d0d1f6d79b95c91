"""Vertical fusion: norm → activation (→ a narrow linear layer) becomes one fused kernel
(``activations.py`` holds the activation ops both passes absorb)."""

from .fuse_norm_act import PASS as FUSE_NORM_ACT
from .fuse_norm_act_linear import PASS as FUSE_NORM_ACT_LINEAR

__all__ = ["FUSE_NORM_ACT", "FUSE_NORM_ACT_LINEAR"]
