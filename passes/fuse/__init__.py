"""Vertical fusion: norm → activation (→ a narrow linear layer), bias or batch norm → activation,
become one fused kernel
(``activations.py`` holds the activation ops both passes absorb)."""

from .fuse_batch_norm_act import PASS as FUSE_BATCH_NORM_ACT
from .fuse_bias_act import PASS as FUSE_BIAS_ACT
from .fuse_group_norm_act import PASS as FUSE_GROUP_NORM_ACT
from .fuse_norm_act import PASS as FUSE_NORM_ACT
from .fuse_norm_act_linear import PASS as FUSE_NORM_ACT_LINEAR
from .fuse_norm_act_per_slice import PASS as FUSE_NORM_ACT_PER_SLICE

__all__ = [
    "FUSE_BATCH_NORM_ACT",
    "FUSE_BIAS_ACT",
    "FUSE_GROUP_NORM_ACT",
    "FUSE_NORM_ACT",
    "FUSE_NORM_ACT_LINEAR",
    "FUSE_NORM_ACT_PER_SLICE",
]
