"""Horizontal fusion: N identical per-slice chains become one chain on a tensor with a batch axis."""

from .group import find_group, rewrite_group

__all__ = ["find_group", "rewrite_group"]
