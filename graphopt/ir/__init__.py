"""The graph IR shared by every frontend, pass and backend."""

from .core_types import Dim, GraphError, Shape
from .dtypes import DType
from .graph import Graph, Node, Use, Value, constant_of
from .infer import infer_outputs, normalize_axis
from .ops import Op, is_canonical, opaque_name
from .provenance import origins, record_origins
from .tensor import Tensor

__all__ = [
    "DType",
    "Dim",
    "Graph",
    "GraphError",
    "Node",
    "Op",
    "Shape",
    "Tensor",
    "Use",
    "Value",
    "constant_of",
    "infer_outputs",
    "is_canonical",
    "normalize_axis",
    "opaque_name",
    "origins",
    "record_origins",
]
