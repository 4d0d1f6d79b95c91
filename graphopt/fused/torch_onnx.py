"""``torch.onnx.export`` of the graphopt torch ops: they become the ``graphopt`` ONNX ops again.

Both exporters are covered: the dynamo exporter through a ``custom_translation_table`` of
onnxscript functions (``translation_table()``), the TorchScript exporter (``dynamo=False``) through
``torch.onnx.register_custom_op_symbolic`` (``register_torchscript_symbolics()``). ``export`` wraps
either and attaches the fallback functions, so the result runs in any ONNX runtime.
"""

from __future__ import annotations

import functools
import io
import logging
import os

import onnx
import torch

import graphopt.fused.torch_ops  # noqa: F401  (registers torch.ops.graphopt.*)
from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.onnx_decompose import MIN_OPSET
from graphopt.fused.onnx_functions import attach_functions
from graphopt.fused.onnx_schema import register_onnx_schemas
from graphopt.fused.table import DOMAIN, DOMAIN_VERSION, NORM_ACT, NORM_ACT_LINEAR

log = logging.getLogger(__name__)

DEFAULT_OPSET = 18


# --- dynamo exporter ----------------------------------------------------------------------------


@functools.cache
def translation_table() -> dict:
    """``custom_translation_table`` entries mapping each torch op to its graphopt ONNX node."""
    from onnxscript import values

    # onnxscript builds nodes from the registered schemas: register them first.
    register_onnx_schemas()
    graphopt = values.Opset(DOMAIN, DOMAIN_VERSION)
    norm_act_op = getattr(graphopt, NORM_ACT.name)
    norm_act_linear_op = getattr(graphopt, NORM_ACT_LINEAR.name)

    def norm_act(x, weight, bias, norm, activation, eps, axis):
        y, _residual_sum = norm_act_op(
            x, weight, bias, norm=norm, activation=activation, epsilon=eps, axis=axis
        )
        # The schema declares ResidualSum; without a residual the node must not produce it.
        node = y.producer()
        if not hasattr(node, "resize_outputs"):
            raise RuntimeError("exporting graphopt.norm_act with dynamo=True needs onnx-ir 0.1.13 or newer")
        node.resize_outputs(1)
        return y

    def add_norm_act(x, residual, weight, bias, norm, activation, eps, axis):
        return norm_act_op(
            x, weight, bias, residual, norm=norm, activation=activation, epsilon=eps, axis=axis
        )

    def norm_act_linear(x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation):
        return norm_act_linear_op(
            x, weight, bias, linear_weight, linear_bias,
            norm=norm, activation=activation, epsilon=eps, out_activation=out_activation,
        )  # fmt: skip

    group_norm_act_op = getattr(graphopt, GROUP_NORM_ACT.name)

    def group_norm_act(x, weight, bias, groups, activation, eps):
        y, _residual_sum = group_norm_act_op(
            x, weight, bias, groups=groups, activation=activation, epsilon=eps
        )
        y.producer().resize_outputs(1)  # (no residual: no ResidualSum; onnx-ir >= 0.1.13, checked above)
        return y

    def add_group_norm_act(x, residual, weight, bias, groups, activation, eps):
        return group_norm_act_op(x, weight, bias, residual, groups=groups, activation=activation, epsilon=eps)

    ops = torch.ops.graphopt
    return {
        ops.norm_act.default: norm_act,
        ops.add_norm_act.default: add_norm_act,
        ops.norm_act_linear.default: norm_act_linear,
        ops.group_norm_act.default: group_norm_act,
        ops.add_group_norm_act.default: add_group_norm_act,
    }


# --- TorchScript exporter -----------------------------------------------------------------------


def _node_name(op) -> str:
    return f"{DOMAIN}::{op.name}"


def _optional(g, value):
    """An absent optional input: ONNX spells it as an empty input name."""
    from torch.onnx import symbolic_helper

    if symbolic_helper._is_none(value):
        return g.op("prim::Constant").setType(torch._C.OptionalType.ofTensor())
    return value


def _symbolics() -> dict:
    from torch.onnx.symbolic_helper import parse_args

    @parse_args("v", "v", "v", "s", "s", "f", "i")
    def norm_act(g, x, weight, bias, norm, activation, eps, axis):
        return g.op(
            _node_name(NORM_ACT), x, _optional(g, weight), _optional(g, bias),
            norm_s=norm, activation_s=activation, epsilon_f=eps, axis_i=axis,
        )  # fmt: skip

    @parse_args("v", "v", "v", "v", "s", "s", "f", "i")
    def add_norm_act(g, x, residual, weight, bias, norm, activation, eps, axis):
        return g.op(
            _node_name(NORM_ACT), x, _optional(g, weight), _optional(g, bias), residual,
            norm_s=norm, activation_s=activation, epsilon_f=eps, axis_i=axis, outputs=2,
        )  # fmt: skip

    @parse_args("v", "v", "v", "v", "v", "s", "s", "f", "s")
    def norm_act_linear(g, x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_act):
        return g.op(
            _node_name(NORM_ACT_LINEAR), x, _optional(g, weight), _optional(g, bias), linear_weight,
            _optional(g, linear_bias),
            norm_s=norm, activation_s=activation, epsilon_f=eps, out_activation_s=out_act,
        )  # fmt: skip

    @parse_args("v", "v", "v", "i", "s", "f")
    def group_norm_act(g, x, weight, bias, groups, activation, eps):
        return g.op(
            _node_name(GROUP_NORM_ACT), x, _optional(g, weight), _optional(g, bias),
            groups_i=groups, activation_s=activation, epsilon_f=eps,
        )  # fmt: skip

    @parse_args("v", "v", "v", "v", "i", "s", "f")
    def add_group_norm_act(g, x, residual, weight, bias, groups, activation, eps):
        return g.op(
            _node_name(GROUP_NORM_ACT), x, _optional(g, weight), _optional(g, bias), residual,
            groups_i=groups, activation_s=activation, epsilon_f=eps, outputs=2,
        )  # fmt: skip

    return {
        f"graphopt::{GROUP_NORM_ACT.torch_name}": group_norm_act,
        f"graphopt::add_{GROUP_NORM_ACT.torch_name}": add_group_norm_act,
        f"graphopt::{NORM_ACT.torch_name}": norm_act,
        f"graphopt::add_{NORM_ACT.torch_name}": add_norm_act,
        f"graphopt::{NORM_ACT_LINEAR.torch_name}": norm_act_linear,
    }


@functools.cache
def register_torchscript_symbolics() -> None:
    """Registers the TorchScript exporter's symbolic of each op (for opsets 13 and newer); once."""
    for name, symbolic in _symbolics().items():
        torch.onnx.register_custom_op_symbolic(name, symbolic, MIN_OPSET)


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
