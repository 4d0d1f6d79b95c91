"""The fused-op table: every fused op graphopt emits is defined here, once.

Each definition names the op, its inputs, outputs and attributes, and gives its reference math
(float64 NumPy). Everything else is derived from these definitions:

* the ONNX schema in domain ``graphopt`` (version 1) and the model-local fallback function
  (``graphopt.fused.onnx_schema`` / ``graphopt.fused.onnx_functions``);
* the PyTorch op ``torch.ops.graphopt.<torch_name>`` (``graphopt.fused.torch_ops``);
* the ONNX Runtime kernels (``graphopt/ort``), whose C++ enums mirror ``Activation`` and ``Norm``.

The integer codes of ``Activation`` and ``Norm`` are part of the kernel ABI (Triton kernels and
the C++ library take them as plain integers): never renumber, only append.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np

DOMAIN = "graphopt"
DOMAIN_VERSION = 1


class Activation(enum.IntEnum):
    IDENTITY = 0
    RELU = 1
    TANH = 2
    GELU = 3  # exact: x * Phi(x), through erf
    GELU_TANH = 4  # tanh approximation
    SILU = 5
    SIGMOID = 6

    @property
    def attr(self) -> str:
        """The spelling used in ONNX attributes and torch op arguments."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Activation:
        try:
            return cls[text.upper()]
        except KeyError:
            valid = ", ".join(a.attr for a in cls)
            raise ValueError(f"unknown activation {text!r}; expected one of: {valid}") from None


class Norm(enum.IntEnum):
    LAYER = 0  # (x - mean) / sqrt(var + eps) * scale + bias
    RMS = 1  # x / sqrt(mean(x^2) + eps) * scale

    @property
    def attr(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Norm:
        try:
            return cls[text.upper()]
        except KeyError:
            valid = ", ".join(n.attr for n in cls)
            raise ValueError(f"unknown norm {text!r}; expected one of: {valid}") from None


def activation_reference(kind: Activation, x: np.ndarray) -> np.ndarray:
    """Float64 reference of each activation."""
    if kind is Activation.IDENTITY:
        return x
    if kind is Activation.RELU:
        return np.maximum(x, 0.0)
    if kind is Activation.TANH:
        return np.tanh(x)
    if kind is Activation.GELU:
        erf = np.vectorize(math.erf, otypes=[np.float64])
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    if kind is Activation.GELU_TANH:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    if kind is Activation.SILU:
        return x / (1.0 + np.exp(-x))
    if kind is Activation.SIGMOID:
        return 1.0 / (1.0 + np.exp(-x))
    raise AssertionError(kind)


def norm_reference(
    norm: Norm, x: np.ndarray, scale: np.ndarray | None, bias: np.ndarray | None, eps: float, axis: int
) -> np.ndarray:
    """Float64 reference of a layer or RMS norm over dimensions [axis, rank)."""
    x = np.asarray(x, dtype=np.float64)
    axes = tuple(range(axis % x.ndim if x.ndim else 0, x.ndim))
    if norm is Norm.LAYER:
        centered = x - x.mean(axis=axes, keepdims=True)
        y = centered / np.sqrt((centered**2).mean(axis=axes, keepdims=True) + eps)
    else:
        y = x / np.sqrt((x**2).mean(axis=axes, keepdims=True) + eps)
    if scale is not None:
        y = y * np.asarray(scale, dtype=np.float64)
    if bias is not None:
        y = y + np.asarray(bias, dtype=np.float64)
    return y


@dataclass(frozen=True)
class Port:
    name: str
    optional: bool = False
    doc: str = ""


@dataclass(frozen=True)
class Attribute:
    name: str
    kind: type  # str, float or int
    default: object
    doc: str = ""


@dataclass(frozen=True)
class FusedOp:
    name: str  # ONNX op_type in domain "graphopt"
    torch_name: str  # torch.ops.graphopt.<torch_name>
    doc: str
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    attributes: tuple[Attribute, ...]
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")
    reference: object = field(default=None, compare=False, repr=False)


def _norm_act_reference(x, scale=None, bias=None, residual=None, *, norm, activation, epsilon, axis):
    """Returns (y, residual_sum); residual_sum is None when no residual is given."""
    norm, activation = Norm.parse(norm), Activation.parse(activation)
    s = np.asarray(x, dtype=np.float64)
    if residual is not None:
        s = s + np.asarray(residual, dtype=np.float64)
    y = activation_reference(activation, norm_reference(norm, s, scale, bias, epsilon, axis))
    return y, (s if residual is not None else None)


def _norm_act_linear_reference(
    x, scale, bias, weight, linear_bias, *, norm, activation, epsilon, out_activation
):
    """y = out_act(act(norm(x)) @ weight.T + linear_bias); weight is [K, D] (nn.Linear's layout)."""
    hidden, _ = _norm_act_reference(
        x, scale, bias, norm=norm, activation=activation, epsilon=epsilon, axis=-1
    )
    y = hidden @ np.asarray(weight, dtype=np.float64).T
    if linear_bias is not None:
        y = y + np.asarray(linear_bias, dtype=np.float64)
    return activation_reference(Activation.parse(out_activation), y)


_NORM_ATTRS = (
    Attribute("norm", str, "layer", "'layer' (mean and variance) or 'rms' (root mean square)"),
    Attribute("activation", str, "identity", "applied to the normalized, scaled, shifted value"),
    Attribute("epsilon", float, 1e-5, "added to the variance (or mean square) before the square root"),
)

NORM_ACT = FusedOp(
    name="NormAct",
    torch_name="norm_act",
    doc=(
        "Y = activation(norm(X [+ Residual]) * Scale + Bias), normalizing over dimensions [axis, rank) "
        "with float32 statistics. With Residual, the second output is X + Residual."
    ),
    inputs=(
        Port("X"),
        Port("Scale", optional=True, doc="shape X.shape[axis:]"),
        Port("Bias", optional=True, doc="shape X.shape[axis:]; layer norm only"),
        Port("Residual", optional=True, doc="same shape as X; added before the norm"),
    ),
    outputs=(
        Port("Y"),
        Port("ResidualSum", optional=True, doc="X + Residual, when Residual is given"),
    ),
    attributes=(*_NORM_ATTRS, Attribute("axis", int, -1, "first normalized dimension")),
    reference=_norm_act_reference,
)

NORM_ACT_LINEAR = FusedOp(
    name="NormActLinear",
    torch_name="norm_act_linear",
    doc=(
        "Y = out_activation(activation(norm(X) * Scale + Bias) @ Weight^T + LinearBias): a norm and "
        "activation over the last dimension D followed by a narrow linear layer (Weight is [K, D]), "
        "reading each row of X once."
    ),
    inputs=(
        Port("X"),
        Port("Scale", optional=True, doc="shape [D]"),
        Port("Bias", optional=True, doc="shape [D]; layer norm only"),
        Port("Weight", doc="shape [K, D]"),
        Port("LinearBias", optional=True, doc="shape [K]"),
    ),
    outputs=(Port("Y", doc="shape X.shape[:-1] + [K]"),),
    attributes=(*_NORM_ATTRS, Attribute("out_activation", str, "identity", "applied after the linear layer")),
    reference=_norm_act_linear_reference,
)


def _fused_ops() -> tuple[FusedOp, ...]:
    # (the ops of the fused-op folders import this module's definitions)
    from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT

    return (NORM_ACT, NORM_ACT_LINEAR, GROUP_NORM_ACT)


FUSED_OPS: tuple[FusedOp, ...] = _fused_ops()


def by_name(name: str) -> FusedOp:
    for op in FUSED_OPS:
        if op.name == name:
            return op
    raise KeyError(name)
