"""``torch.onnx.export`` of the graphopt torch ops: they become the ``graphopt`` ONNX ops again.

Both exporters are covered: the dynamo exporter through a ``custom_translation_table`` of
onnxscript functions (``translation_table()``), the TorchScript exporter (``dynamo=False``) through
``torch.onnx.register_custom_op_symbolic`` (``register_torchscript_symbolics()``). ``export`` wraps
either and attaches the fallback functions, so the result runs in any ONNX runtime.
"""

from __future__ import annotations

import functools
import inspect
import io
import logging
import os

import onnx
import torch

import graphopt.fused.torch_ops  # noqa: F401  (registers torch.ops.graphopt.*)
from graphopt.fused.onnx_decompose import MIN_OPSET
from graphopt.fused.onnx_functions import attach_functions
from graphopt.fused.onnx_schema import register_onnx_schemas
from graphopt.fused.registry import FUSED_OPS
from graphopt.fused.spec import DOMAIN, DOMAIN_VERSION, FusedOp, TorchForm

log = logging.getLogger(__name__)

DEFAULT_OPSET = 18


# --- dynamo exporter ----------------------------------------------------------------------------


def _argument_names(op: FusedOp, form: TorchForm) -> list[str]:
    """The torch op's argument names, in schema order (ports, then attributes)."""
    return [op.inputs[op.port_index(n)].torch_name for n in form.inputs] + [a.ir_name for a in op.attributes]


def _with_signature(fn, names: list[str], first: tuple[str, ...] = ()):
    """``fn(*args)`` presented with named parameters: both exporters read a translation's signature."""
    parameters = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in (*first, *names)]
    fn.__signature__ = inspect.Signature(parameters)
    return fn


def _onnx_arguments(op: FusedOp, form: TorchForm, args) -> tuple[list, dict]:
    """A torch call's arguments as the ONNX node's inputs (in port order, None where absent) and
    attributes (ONNX names)."""
    by_port = dict(zip(form.inputs, args, strict=False))
    inputs = [by_port.get(p.name) for p in op.inputs]
    while inputs and inputs[-1] is None:
        inputs.pop()
    values = args[len(form.inputs) :]
    return inputs, {a.name: v for a, v in zip(op.attributes, values, strict=True)}


# --- dynamo exporter ----------------------------------------------------------------------------


@functools.cache
def translation_table() -> dict:
    """``custom_translation_table`` entries mapping each torch op to its graphopt ONNX node."""
    from onnxscript import values

    # onnxscript builds nodes from the registered schemas: register them first.
    register_onnx_schemas()
    opset = values.Opset(DOMAIN, DOMAIN_VERSION)
    table = {}
    for op in FUSED_OPS:
        for form in op.torch_forms:
            target = getattr(torch.ops.graphopt, form.name).default
            table[target] = _dynamo_translation(op, form, getattr(opset, op.name))
    return table


def _dynamo_translation(op: FusedOp, form: TorchForm, onnx_op):
    def translate(*args):
        inputs, attrs = _onnx_arguments(op, form, args)
        outputs = onnx_op(*inputs, **attrs)
        if len(op.outputs) == 1:
            return outputs
        if len(form.outputs) == len(op.outputs):
            return outputs
        # The schema declares optional outputs this form does not produce: the node must not have them.
        node = outputs[0].producer()
        if not hasattr(node, "resize_outputs"):
            raise RuntimeError(
                f"exporting graphopt.{form.name} with dynamo=True needs onnx-ir 0.1.13 or newer"
            )
        node.resize_outputs(len(form.outputs))
        return outputs[0] if len(form.outputs) == 1 else tuple(outputs[: len(form.outputs)])

    return _with_signature(translate, _argument_names(op, form))


# --- TorchScript exporter -----------------------------------------------------------------------

# parse_args' code per attribute type: string, float, int.
_PARSE_CODES = {str: "s", float: "f", int: "i"}


def _optional(g, value):
    """An absent optional input: ONNX spells it as an empty input name."""
    from torch.onnx import symbolic_helper

    if symbolic_helper._is_none(value):
        return g.op("prim::Constant").setType(torch._C.OptionalType.ofTensor())
    return value


def _torchscript_symbolic(op: FusedOp, form: TorchForm):
    from torch.onnx.symbolic_helper import parse_args

    suffixes = {str: "s", float: "f", int: "i"}

    def symbolic(g, *args):
        inputs, attrs = _onnx_arguments(op, form, args)
        given = [_optional(g, v) for v in inputs]
        kwargs = {f"{name}_{suffixes[op.attribute(name).value_type]}": v for name, v in attrs.items()}
        return g.op(f"{DOMAIN}::{op.name}", *given, **kwargs, outputs=len(form.outputs))

    codes = ["v"] * len(form.inputs) + [_PARSE_CODES[a.value_type] for a in op.attributes]
    return parse_args(*codes)(_with_signature(symbolic, _argument_names(op, form), first=("g",)))


@functools.cache
def register_torchscript_symbolics() -> None:
    """Registers the TorchScript exporter's symbolic of each op (for opsets 13 and newer); once."""
    for op in FUSED_OPS:
        for form in op.torch_forms:
            symbolic = _torchscript_symbolic(op, form)
            torch.onnx.register_custom_op_symbolic(f"{DOMAIN}::{form.name}", symbolic, MIN_OPSET)


# --- export -------------------------------------------------------------------------------------


def export(
    model: torch.nn.Module,
    args: tuple,
    f: str | os.PathLike | None = None,
    *,
    dynamo: bool = True,
    opset_version: int = DEFAULT_OPSET,
    **kwargs,
) -> onnx.ModelProto:
    """``torch.onnx.export`` with the graphopt ops translated and their fallback functions attached.

    Returns the model, and saves it to ``f`` when given. Other keyword arguments go to
    ``torch.onnx.export``; with ``dynamo=True`` a ``custom_translation_table`` given there is
    merged with graphopt's.
    """
    kwargs.setdefault("verbose", False)
    if dynamo:
        table = {**translation_table(), **(kwargs.pop("custom_translation_table", None) or {})}
        program = torch.onnx.export(
            model, args, dynamo=True, opset_version=opset_version, custom_translation_table=table, **kwargs
        )
        proto = program.model_proto
    else:
        register_torchscript_symbolics()
        custom_opsets = {DOMAIN: DOMAIN_VERSION, **(kwargs.pop("custom_opsets", None) or {})}
        buffer = io.BytesIO()
        torch.onnx.export(
            model, args, buffer, dynamo=False, opset_version=opset_version, custom_opsets=custom_opsets,
            **kwargs,
        )  # fmt: skip
        proto = onnx.load_from_string(buffer.getvalue())
    attach_functions(proto)
    if f is not None:
        onnx.save(proto, os.fspath(f))
        log.info("exported %s to %s", type(model).__name__, os.fspath(f))
    return proto
