"""What the horizontal passes share: per-slice chains, where their pieces come from, the batching
rule of each op, and finding and rewriting a batchable group at a stack/concat. Not a pass."""

from .group import find_group, rewrite_group

__all__ = ["find_group", "rewrite_group"]
