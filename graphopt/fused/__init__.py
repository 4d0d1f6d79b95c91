"""graphopt's fused ops, one folder each (``registry`` lists them), registered with ONNX, PyTorch and
ONNX Runtime from their specs (``spec``).

Importing this package is cheap: it imports neither onnx nor torch. Each entry point imports what
it needs on first use.

* ``register_onnx_schemas()``: the ONNX schemas of domain ``graphopt`` (checker, shape inference).
* ``attach_functions(model)``: the model-local fallback functions of the graphopt nodes of a model.
* ``register_torch_ops()``: registers ``torch.ops.graphopt.*`` and returns that namespace.
* ``export(module, args, f=None, *, dynamo=True, opset_version=18, **kwargs)``: ``torch.onnx.export``
  translating the torch ops back to graphopt ONNX nodes, with fallback functions attached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphopt.fused.norm_act import NORM_ACT
from graphopt.fused.norm_act_linear import NORM_ACT_LINEAR
from graphopt.fused.registry import FUSED_OPS, by_ir_op, by_name
from graphopt.fused.spec import DOMAIN, DOMAIN_VERSION, Activation, FusedOp, Norm

if TYPE_CHECKING:
    import onnx
    import torch

__all__ = [
    "DOMAIN",
    "DOMAIN_VERSION",
    "FUSED_OPS",
    "NORM_ACT",
    "NORM_ACT_LINEAR",
    "Activation",
    "FusedOp",
    "Norm",
    "attach_functions",
    "by_ir_op",
    "by_name",
    "export",
    "register_onnx_schemas",
    "register_torch_ops",
]


def register_onnx_schemas() -> None:
    from graphopt.fused import onnx_schema

    onnx_schema.register_onnx_schemas()


def attach_functions(model: onnx.ModelProto) -> None:
    from graphopt.fused import onnx_functions

    onnx_functions.attach_functions(model)


def register_torch_ops():
    """Registers the torch ops (once) and returns ``torch.ops.graphopt``."""
    import torch

    from graphopt.fused import torch_ops

    del torch_ops  # imported for its registrations
    return torch.ops.graphopt


def export(model: torch.nn.Module, args: tuple, f=None, **kwargs) -> onnx.ModelProto:
    from graphopt.fused import torch_onnx

    return torch_onnx.export(model, args, f, **kwargs)
