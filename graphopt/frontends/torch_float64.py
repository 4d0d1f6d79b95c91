"""A torch.export program evaluated in float64, each value rounded to the dtype the program gives it.

The torch counterpart of ``onnx_float64``: every call runs on float64 copies of its inputs (state and
user inputs alike), and each floating result is stored in the dtype its ``meta["val"]`` records under
one of ``stored_rounding``'s modes (not rounded, rounded, rounded with noise). The numeric check
asks it when the optimized program and the original disagree
(``graphopt.verification.float64_check``). Views and in-place updates share memory as in the program
(an update is stored in place). Programs it cannot evaluate so give None (an op without a float64
kernel, a reinterpretation of bits, a result of unknown dtype, weights beyond
``onnx_float64.MAX_WEIGHT_BYTES``).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Sequence

import numpy as np
import torch
from torch import fx
from torch.export.graph_signature import InputKind, OutputKind

from ..verification.stored_rounding import MAKES_VALUES, MODES, store
from .onnx_float64 import MAX_WEIGHT_BYTES
from .torch_arrays import to_numpy, to_torch

log = logging.getLogger(__name__)

_NARROW = (torch.float32, torch.float16, torch.bfloat16)
# Checks of a value's traced dtype (a traced ``x.to(dtype)`` leaves one): every value here is float64, so
# they are not run; what they assert of the traced program holds in it (torch checked them as it traced).
_DTYPE_CHECKS = frozenset({torch.ops.aten._assert_tensor_metadata.default})


def float64_outputs(
    program: torch.export.ExportedProgram,
    draws: Sequence[dict[str, np.ndarray]],
    modes: Sequence[int] = MODES,
) -> list[dict[int, list[np.ndarray]]] | None:
    """The program's user outputs on each set of feeds (by placeholder name) in each of ``modes``
    (of ``stored_rounding``), float ones as float64 arrays; None when it cannot be evaluated so."""
    graph = program.graph_module.graph
    if any(_unsupported(node) for node in graph.nodes):
        return None
    signature = program.graph_signature
    weights = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    state = [_state(program, s) for s in signature.input_specs if s.kind in weights]
    held = sum(t.numel() * t.element_size() for t in state if isinstance(t, torch.Tensor))
    if held > MAX_WEIGHT_BYTES:  # (as for ONNX models: each evaluation holds a float64 copy)
        log.info("no float64 evaluation of the original: %d bytes of weights", held)
        return None
    users = [i for i, s in enumerate(signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    try:
        results = []
        for feeds in draws:
            runs = {}
            for mode in modes:
                arguments = []
                for spec in signature.input_specs:
                    if spec.kind == InputKind.USER_INPUT:
                        arguments.append(_widen(to_torch(feeds[spec.arg.name])))
                    else:
                        arguments.append(_widen(_state(program, spec)))
                with torch.no_grad():
                    flat = _Float64Interpreter(program.graph_module, mode).run(*arguments)
                runs[mode] = [_array(flat[i]) for i in users]
            results.append(runs)
        return results
    except Exception as error:  # an op without a float64 kernel, or one this cannot run: no answer
        log.info("no float64 evaluation of the original: %s", str(error).strip().splitlines()[:1])
        return None


def _state(program: torch.export.ExportedProgram, spec):
    if spec.kind == InputKind.CONSTANT_TENSOR or spec.target in program.constants:
        return program.constants[spec.target]
    return program.state_dict[spec.target]


def _widen(value):
    if isinstance(value, torch.Tensor) and value.dtype in _NARROW:
        return value.detach().to(torch.float64)
    if isinstance(value, torch.Tensor):
        return value.detach().clone()  # (the program's own state is never written)
    return value


def _array(value) -> np.ndarray:
    return to_numpy(value) if isinstance(value, torch.Tensor) else np.asarray(value)


def _unsupported(node: fx.Node) -> bool:
    """A call that reads a tensor's bits as another dtype (in float64 its bits are others)."""
    return node.op == "call_function" and str(node.target) in ("aten.view.dtype", "aten.view_as_real.default")


def _computes(node: fx.Node) -> bool:
    """Whether the call computes its result, not only makes a constant, a fill or a copy
    (``stored_rounding.MAKES_VALUES``; those get no noise)."""
    packet = getattr(node.target, "_overloadpacket", None)
    return getattr(packet, "__name__", None) not in MAKES_VALUES


def _aliases(node: fx.Node) -> bool:
    """Whether the call's result shares memory with an argument: a view (select, slice, reshape as
    a view), an in-place update (add_, copy_, fill_, dropout_), or an element of a list of them."""
    if node.target is operator.getitem:
        return True
    schema = getattr(node.target, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


class _Float64Interpreter(fx.Interpreter):
    def __init__(self, module: fx.GraphModule, mode: int):
        super().__init__(module)
        self.mode = mode
        self.index = 0

    def run_node(self, node: fx.Node):
        if node.op == "call_function" and node.target in _DTYPE_CHECKS:
            return None
        result = super().run_node(node)
        if node.op != "call_function":
            return result
        # (an alias-annotated conversion, x.to(bfloat16), gives a new narrow tensor: stored below)
        converted = (
            isinstance(result, torch.Tensor) and result.is_floating_point() and result.dtype != torch.float64
        )
        if _aliases(node) and not converted:
            # Views and in-place updates keep sharing memory as in the program (an update through a
            # view shows in its base; BEiT and Swin build their position tables and masks so): a view's
            # values are its base's, already stored, and an update is stored in place.
            if getattr(node.target, "_schema", None) is not None and node.target._schema.is_mutable:
                self._store_in_place(result, node.meta.get("val"), _computes(node))
            return result
        return self._stored(result, node.meta.get("val"), _computes(node))

    def _store_in_place(self, result, expected, computed: bool) -> None:
        if isinstance(result, torch.Tensor) and isinstance(expected, torch.Tensor):
            stored = self._stored(result, expected, computed)
            if stored is not result:
                result.copy_(stored)

    def _stored(self, result, expected, computed: bool = True):
        """``result`` (float64) stored in the dtype of ``expected`` (the traced value), kept float64."""
        if isinstance(result, torch.Tensor):
            if not isinstance(expected, torch.Tensor):
                raise TypeError("a tensor result without a recorded dtype")
            self.index += 1
            if expected.dtype not in _NARROW or not result.is_floating_point():
                return result
            narrow = to_numpy(torch.empty((), dtype=expected.dtype)).dtype
            stored = store(to_numpy(result.to(torch.float64)), narrow, self.mode, self.index, computed)
            # (shaped in numpy: a torch view of it would be refused by an in-place detach_; and
            # ascontiguousarray makes a 0-d array 1-d)
            return torch.from_numpy(np.ascontiguousarray(stored).reshape(tuple(result.shape)))
        if isinstance(result, list | tuple) and isinstance(expected, list | tuple):
            return type(result)(self._stored(r, e, computed) for r, e in zip(result, expected, strict=True))
        return result
