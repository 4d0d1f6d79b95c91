"""Canonicalize: one form per op (positive axes, known shapes, no no-op casts, identities or unit
arithmetic), constants folded, duplicates merged and dead nodes removed, so each later rule matches one
form."""

from .collapse_reshapes import PASS as COLLAPSE_RESHAPES
from .drop_metadata_asserts import PASS as DROP_METADATA_ASSERTS
from .drop_noop_casts import PASS as DROP_NOOP_CASTS
from .drop_unit_arithmetic import PASS as DROP_UNIT_ARITHMETIC
from .eliminate_common_subexpressions import PASS as ELIMINATE_COMMON_SUBEXPRESSIONS
from .fold_batch_norm import PASS as FOLD_BATCH_NORM
from .fold_constants import PASS as FOLD_CONSTANTS
from .fold_onnx_batch_norm import PASS as FOLD_ONNX_BATCH_NORM
from .fold_shape_inputs import PASS as FOLD_SHAPE_INPUTS
from .join_slices_into_split import PASS as JOIN_SLICES_INTO_SPLIT
from .merge_recognized_duplicates import PASS as MERGE_RECOGNIZED_DUPLICATES
from .normalize_axes import PASS as NORMALIZE_AXES
from .remove_dead_nodes import PASS as REMOVE_DEAD_NODES
from .remove_identity import PASS as REMOVE_IDENTITY

__all__ = [
    "COLLAPSE_RESHAPES",
    "DROP_METADATA_ASSERTS",
    "DROP_NOOP_CASTS",
    "DROP_UNIT_ARITHMETIC",
    "ELIMINATE_COMMON_SUBEXPRESSIONS",
    "FOLD_BATCH_NORM",
    "FOLD_CONSTANTS",
    "FOLD_ONNX_BATCH_NORM",
    "FOLD_SHAPE_INPUTS",
    "JOIN_SLICES_INTO_SPLIT",
    "MERGE_RECOGNIZED_DUPLICATES",
    "NORMALIZE_AXES",
    "REMOVE_DEAD_NODES",
    "REMOVE_IDENTITY",
]
