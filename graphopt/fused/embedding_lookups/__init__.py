"""The EmbeddingLookups fused op: N features' embedding lookups on their tables stored as one (spec,
ONNX decomposition, torch implementation, Triton and C++ kernels)."""

from graphopt.fused.embedding_lookups.spec import EMBEDDING_LOOKUPS

__all__ = ["EMBEDDING_LOOKUPS"]
