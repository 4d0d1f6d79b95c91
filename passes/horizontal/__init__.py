"""Horizontal fusion: N identical per-slice chains become one chain on a tensor with a batch axis
(``batching/`` holds what the passes share: chains, sources, the batching rule of each op)."""

from .batch_chains import FUSED_PARALLEL_PASS as BATCH_CHAINS_AFTER_FUSION
from .batch_chains import PARALLEL_PASS as BATCH_PARALLEL_CHAINS
from .batch_chains import SPLIT_PASS as BATCH_SPLIT_CHAINS
from .batch_embedding_bags import PASS as BATCH_EMBEDDING_BAGS
from .batch_embedding_lookups import PASS as BATCH_EMBEDDING_LOOKUPS

__all__ = [
    "BATCH_CHAINS_AFTER_FUSION",
    "BATCH_EMBEDDING_BAGS",
    "BATCH_EMBEDDING_LOOKUPS",
    "BATCH_PARALLEL_CHAINS",
    "BATCH_SPLIT_CHAINS",
]
