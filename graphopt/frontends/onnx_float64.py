"""An ONNX model evaluated in float64, each value rounded to the type the model declares for it.

This is what the model computes under ONNX semantics, without the rounding a runtime's kernels add
inside each op (a sum of many float32 terms, a vectorized tanh that rounds one lane differently): every
op runs in float64 on float64 copies of its inputs (ONNX's reference evaluator), and its result is
stored in its declared type under one of ``stored_rounding``'s modes (not rounded, rounded, rounded
with noise). The numeric check asks it when the optimized model and the original disagree
(``graphopt.verification.float64_check``).

Models it cannot evaluate this way give None: subgraphs (If, Loop, Scan), a value whose type shape
inference cannot tell, weights beyond ``MAX_WEIGHT_BYTES``, an op the reference evaluator lacks.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from onnx.reference.op_run import OpRun

from ..ir import DType
from ..verification.stored_rounding import MODES, ONNX_MAKES_VALUES, store
from .onnx_order import in_topological_order

log = logging.getLogger(__name__)

# The float64 copy doubles float32 weights in memory, and the reference evaluator is slow: models
# with more weights than this get no float64 evaluation.
MAX_WEIGHT_BYTES = 256 << 20
NARROW_FLOATS = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16}
_DOMAIN = "graphopt.float64"
_MODE = "graphopt_float64_mode"  # (the graph input that says how values are stored)
_ROUNDED = "__float64"  # (suffix of a value's float64 result before it is stored)


class Store(OpRun):
    """``Store(x, mode)``: x as stored in the type ``to`` under the mode (stored_rounding.store)."""

    op_domain = _DOMAIN

    def _run(self, x, mode, to=None, index=None, computed=1):
        return (store(x, DType.from_onnx(to).numpy, int(mode), index, bool(computed)),)


class GatherElements(OpRun):
    """ONNX GatherElements, in place of the reference evaluator's, which fails wherever the indices
    are smaller than the data on an axis besides ``axis`` (BERT-like models gather their token-type
    buffer so: 'cannot reshape array of size 1 into shape (1,16)'). Out-of-range indices raise."""

    op_domain = ""

    def _run(self, data, indices, axis=None):
        axis = (axis or 0) % data.ndim
        region = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(indices.shape))
        positions = np.where(indices < 0, indices + data.shape[axis], indices)
        return (np.take_along_axis(data[region], positions, axis=axis),)


def float64_outputs(
    model: onnx.ModelProto | str | Path,
    draws: Sequence[dict[str, np.ndarray]],
    base: Path | None,
    modes: Sequence[int] = MODES,
) -> list[dict[int, list[np.ndarray]]] | None:
    """The model's outputs on each set of feeds in each of ``modes`` (of ``stored_rounding``; float
    outputs as float64 arrays); None when the model cannot be evaluated so."""
    from onnx.reference import ReferenceEvaluator

    proto = _load(model, base)
    if proto is None:
        return None
    exact = _float64_copy(proto)
    if exact is None:
        return None
    try:
        evaluator = ReferenceEvaluator(exact, new_ops=[Store, GatherElements])
        wanted = {i.name for i in exact.graph.input}
        results = []
        for feeds in draws:
            widened = {k: _widen(v) for k, v in feeds.items() if k in wanted}
            # (the stress draws reach inf and NaN on purpose: NumPy's warnings about them are no news,
            # and would land on the user's stderr past -q)
            with np.errstate(all="ignore"):
                results.append(
                    {
                        mode: [np.asarray(o) for o in evaluator.run(None, {**widened, _MODE: np.int64(mode)})]
                        for mode in modes
                    }
                )
        return results
    except Exception as error:  # an op the reference lacks, or runs differently: no float64 answer
        log.info("no float64 evaluation of the original: %s", str(error).strip().splitlines()[:1])
        return None


def _load(model: onnx.ModelProto | str | Path, base: Path | None) -> onnx.ModelProto | None:
    if not isinstance(model, onnx.ModelProto):
        path = Path(model)
        if _external_bytes(onnx.load(str(path), load_external_data=False), path.parent) > MAX_WEIGHT_BYTES:
            return None
        return onnx.load(str(path))
    if model.ByteSize() > MAX_WEIGHT_BYTES:
        return None
    external = any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer)
    if not external:
        return model
    if base is None or _external_bytes(model, base) > MAX_WEIGHT_BYTES:
        return None
    loaded = onnx.ModelProto()
    loaded.CopyFrom(model)
    onnx.external_data_helper.load_external_data_for_model(loaded, str(base))
    return loaded


def _external_bytes(model: onnx.ModelProto, base: Path) -> int:
    total = model.ByteSize()
    for tensor in model.graph.initializer:
        if tensor.data_location == TensorProto.EXTERNAL:
            info = {entry.key: entry.value for entry in tensor.external_data}
            total += int(info.get("length", 0)) or (base / info.get("location", "")).stat().st_size
    return total


def _widen(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    return array.astype(np.float64) if _is_narrow_float(array.dtype) else array


def _is_narrow_float(dtype: np.dtype) -> bool:
    return (dtype.kind == "f" and dtype.itemsize < 8) or dtype.name == "bfloat16"


def _float64_copy(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The model with every float tensor in float64 and each node's float results rounded to their
    declared type; None if it has subgraphs or values of unknown type."""
    graph = model.graph
    subgraphs = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    if any(a.type in subgraphs for n in graph.node for a in n.attribute):
        return None
    model = in_topological_order(model)  # (shape inference and the evaluator read nodes in file order)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # inference is needed for the declared types
        return None
    types = {
        info.name: info.type.tensor_type.elem_type
        for info in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output)
        if info.type.HasField("tensor_type")
    }
    types.update({t.name: t.data_type for t in graph.initializer})
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    target = copy.graph
    for info in (*target.input, *target.output):
        _widen_type(info.type)
    del target.value_info[:]
    for tensor in target.initializer:
        _widen_tensor(tensor)
    for function in copy.functions:
        for node in function.node:
            _widen_attributes(node)
    nodes = []
    for node in target.node:
        _widen_attributes(node)
        nodes.append(node)
        for position, name in enumerate(node.output):
            if not name:
                continue
            if name not in types or types[name] == TensorProto.UNDEFINED:
                log.info("no float64 evaluation of the original: the type of %r is unknown", name)
                return None
            declared = types[name]
            if declared in NARROW_FLOATS:
                node.output[position] = name + _ROUNDED
                computed = int(node.domain not in ("", "ai.onnx") or node.op_type not in ONNX_MAKES_VALUES)
                store_node = onnx.helper.make_node(
                    "Store", [name + _ROUNDED, _MODE], [name], domain=_DOMAIN, to=declared, index=len(nodes),
                    computed=computed,
                )  # fmt: skip
                nodes.append(store_node)
    del target.node[:]
    target.node.extend(nodes)
    target.input.append(onnx.helper.make_tensor_value_info(_MODE, TensorProto.INT64, []))
    copy.opset_import.append(onnx.helper.make_opsetid(_DOMAIN, 1))
    return copy


def _widen_type(type_proto: onnx.TypeProto) -> None:
    if type_proto.HasField("tensor_type") and type_proto.tensor_type.elem_type in NARROW_FLOATS:
        type_proto.tensor_type.elem_type = TensorProto.DOUBLE


def _widen_tensor(tensor: onnx.TensorProto) -> None:
    if tensor.data_type in NARROW_FLOATS:
        array = numpy_helper.to_array(tensor).astype(np.float64)
        tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))


def _widen_attributes(node: onnx.NodeProto) -> None:
    """Casts and constants of a node in float64 (a Cast's rounding is kept by the Cast pair after it)."""
    for attribute in node.attribute:
        if attribute.name in ("to", "dtype") and attribute.type == onnx.AttributeProto.INT:
            if attribute.i in NARROW_FLOATS:
                attribute.i = TensorProto.DOUBLE
        elif attribute.type == onnx.AttributeProto.TENSOR:
            _widen_tensor(attribute.t)
