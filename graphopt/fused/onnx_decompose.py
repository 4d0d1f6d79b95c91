"""Decompositions of the fused ops into standard ONNX ops, for one attribute combination and opset.

These are the bodies of the model-local fallback functions (``graphopt.fused.onnx_functions``). A
function body cannot branch on attribute values or on which optional inputs are present, so each
body is built for one ``Variant``; each op's ``decompose.py`` builds its body from the pieces here
(``Body``, ``normalize``, ``activate``).

Where a standard op computes the statistics (LayerNormalization, RMSNormalization and
InstanceNormalization keep them in float32 whatever X's type), the body computes in X's element type,
as the graph the exporters write does: ONNX Runtime then runs the ops the original ran, at their cost.
With casts to float32 around them, fp16 BERT and GPT-2 took 1.30x the original's time in its CUDA EP
without graphopt's library (bench/results/2026-11-28-h200d/without_library). Where the statistics are
spelled out in ReduceMean (opsets before those ops), inputs are cast up to float32 on entry and the
results cast back to X's element type.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

import onnx
from onnx import TensorProto, helper

from graphopt.fused.registry import by_name
from graphopt.fused.spec import Activation, FusedOp, Norm

MIN_OPSET = 13
CAST_LIKE_OPSET = 15  # before it, the cast back to X's type must name the type: see Variant.elem_type
LAYER_NORM_OPSET = 17
REDUCE_AXES_INPUT_OPSET = 18  # ReduceMean's axes moved from an attribute to an input
RMS_NORM_OPSET = 23
GELU_OPSET = 20  # ONNX Gelu (approximate "none" or "tanh")


@dataclass(frozen=True)
class Variant:
    """Everything a function body depends on: attributes, optional ports in use, opset."""

    op_name: str
    # (ONNX attribute name, value) in the spec's order; choices parsed to their enum members.
    attrs: tuple[tuple[str, object], ...]
    # Optional ports in use: inputs given and outputs asked for, e.g. {"Scale", "ResidualSum"}.
    present: frozenset[str] = frozenset()
    opset: int = 18
    elem_type: int = TensorProto.FLOAT  # X's element type; read by the body below opset 15 and with a fill
    # X.shape[axis:] where it is static and the body fills in an absent Scale or Bias: the fill is then a
    # constant, which a runtime folds like a weight. () where unknown: the fill is built from X's shape
    # at every call (ONNX Runtime folds no Shape of a value with a symbolic dimension: a CPU MLP of fresh
    # LayerNorms took 1.17x the original's time without graphopt's library).
    trailing: tuple[int, ...] = ()

    @classmethod
    def of(
        cls, op: FusedOp, *, present=frozenset(), opset=18, elem_type=TensorProto.FLOAT, trailing=(), **attrs
    ):
        """The variant of ``op`` with the given attribute values (ONNX names; absent: defaults)."""
        unknown = set(attrs) - {a.name for a in op.attributes}
        if unknown:
            raise ValueError(f"{op.name} has no attribute {sorted(unknown)}")
        values = []
        for a in op.attributes:
            value = attrs.get(a.name, a.default)
            if a.choices is not None and isinstance(value, str):
                value = a.kind.parse(value)
            values.append((a.name, value if a.choices is not None else a.kind(value)))
        return cls(op.name, tuple(values), frozenset(present), opset, elem_type, tuple(trailing))

    def attr(self, name: str):
        return dict(self.attrs)[name]


class Body:
    """Appends nodes to a function body, naming each output uniquely."""

    def __init__(self, variant: Variant):
        self.variant = variant
        self.nodes: list[onnx.NodeProto] = []
        self.in_input_type = False  # computing in X's element type (not float32): compute_in_input_type

    def compute_in_input_type(self) -> None:
        """From here on, ``to_compute`` brings operands to X's element type instead of float32: for
        bodies whose statistics a standard op keeps in float32 by itself."""
        self.in_input_type = True

    def op(self, op_type: str, *inputs: str, output: str | None = None, **attrs) -> str:
        name = output or f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [name], **attrs))
        return name

    def const(self, value: float) -> str:
        """A scalar in the compute type."""
        return self.from_float(self.op("Constant", value_float=float(value)))

    def ints(self, values) -> str:
        return self.op("Constant", value_ints=list(values))

    def to_float(self, name: str) -> str:
        return self.op("Cast", name, to=TensorProto.FLOAT)

    def from_float(self, name: str) -> str:
        """A float32 value (a constant, a weight transposed in float32) in the compute type."""
        return self.to_compute(name) if self.in_input_type else name

    def to_compute(self, name: str) -> str:
        """``name`` in the type the body computes in: float32, or X's element type."""
        if not self.in_input_type:
            return self.to_float(name)
        if name == "X":
            return name
        if self.variant.opset >= CAST_LIKE_OPSET:
            return self.op("CastLike", name, "X")
        return self.op("Cast", name, to=self.variant.elem_type)

    def back_to_input_type(self, name: str, output: str) -> str:
        if self.in_input_type:
            # (there already: an Identity, which ONNX Runtime removes even where it writes a graph output;
            # a Cast to the same type stays there, one more copy of the output per call)
            return self.op("Identity", name, output=output)
        if self.variant.opset >= CAST_LIKE_OPSET:
            return self.op("CastLike", name, "X", output=output)
        return self.op("Cast", name, output=output, to=self.variant.elem_type)

    def reduce_mean(self, x: str, axes: tuple[int, ...]) -> str:
        if self.variant.opset >= REDUCE_AXES_INPUT_OPSET:
            return self.op("ReduceMean", x, self.ints(axes), keepdims=1)
        return self.op("ReduceMean", x, axes=list(axes), keepdims=1)

    def filled_like_trailing(self, x: str, axis: int, value: float) -> str:
        """``value`` in the shape x.shape[axis:], in the compute type (a Scale or Bias for ops that
        require or are assumed to have one): a constant where the variant knows that shape."""
        if self.variant.trailing:
            kind = self.variant.elem_type if self.in_input_type else TensorProto.FLOAT
            dims = self.variant.trailing
            fill = helper.make_tensor("fill", kind, dims, [value] * math.prod(dims))
            return self.op("Constant", value=fill)
        shape = self.op("Shape", x, start=axis)
        fill = helper.make_tensor("fill", TensorProto.FLOAT, [1], [value])
        return self.from_float(self.op("ConstantOfShape", shape, value=fill))


def _normalize_by_reduction(body: Body, s: str, scale: str | None, bias: str | None, axis: int) -> str:
    """Layer or RMS normalization over [axis, rank) from ReduceMean (any opset), scaled and shifted.

    Spelled as ONNX Runtime's LayerNormFusion and SimplifiedLayerNormFusion match it (the TorchScript
    exporter's x * (1 / Sqrt(...)) becomes this in its first pass): the square as Pow(x, 2), Div(x,
    Sqrt(...)), the scale and shift straight after the Div. Spelled with Mul(x, x) and Reciprocal, nothing
    fused: tiny LLaMA, Qwen2 and T5 exported at opset 17 took 1.13-1.29x the original's time on its CPU
    EP without graphopt's library, each of the original's RMS norms being one
    SimplifiedLayerNormalization there (0.97-1.02x now; from the dynamo exporter, whose Reciprocal does
    not fuse, 0.83-0.88x).
    """
    v = body.variant
    if axis < 0:
        # A negative axis names the trailing dimensions whatever the rank (the ONNX backend writes one
        # wherever it knows X's rank).
        x, axes = s, tuple(range(axis, 0))
    else:
        # A non-negative axis needs the rank, which the body does not know: flatten to 2-D.
        x, axes = body.op("Flatten", s, axis=axis), (-1,)
    if v.attr("norm") is Norm.LAYER:
        x = body.op("Sub", x, body.reduce_mean(x, axes))
    mean_square = body.reduce_mean(body.op("Pow", x, body.const(2.0)), axes)
    y = body.op("Div", x, body.op("Sqrt", body.op("Add", mean_square, body.const(v.attr("epsilon")))))
    if axis >= 0:
        # (back to X's shape before the scale and shift, which may broadcast over X's leading dims)
        y = body.op("Reshape", y, body.op("Shape", s))
    if scale:
        y = body.op("Mul", y, scale)
    return body.op("Add", y, bias) if bias else y


def has_norm_op(variant: Variant) -> bool:
    """Whether the variant's norm is one standard op at its opset (which keeps float32 statistics)."""
    norm = variant.attr("norm")
    return variant.opset >= (LAYER_NORM_OPSET if norm is Norm.LAYER else RMS_NORM_OPSET)


def normalize(body: Body, s: str, scale: str | None, bias: str | None, axis: int) -> str:
    """norm(s) * scale + bias in the compute type, with the variant's ``norm`` and ``epsilon``."""
    v = body.variant
    norm, epsilon = v.attr("norm"), v.attr("epsilon")
    if norm is Norm.LAYER and v.opset >= LAYER_NORM_OPSET:
        # (a zero Bias where there is none: ONNX Runtime's transformer optimizer, which inlines these
        # functions, reads a LayerNormalization's third input unconditionally and fails without it)
        scale = scale or body.filled_like_trailing(s, axis, 1.0)
        bias = bias or body.filled_like_trailing(s, axis, 0.0)
        return body.op("LayerNormalization", s, scale, bias, axis=axis, epsilon=epsilon)
    if norm is Norm.RMS and v.opset >= RMS_NORM_OPSET:
        scale = scale or body.filled_like_trailing(s, axis, 1.0)
        y = body.op("RMSNormalization", s, scale, axis=axis, epsilon=epsilon)
        return body.op("Add", y, bias) if bias else y
    return _normalize_by_reduction(body, s, scale, bias, axis)


def activate(body: Body, kind: Activation, z: str) -> str:
    if kind is Activation.IDENTITY:
        return z
    if kind is Activation.RELU:
        return body.op("Relu", z)
    if kind is Activation.TANH:
        return body.op("Tanh", z)
    if kind is Activation.SIGMOID:
        return body.op("Sigmoid", z)
    if kind is Activation.SILU:
        return body.op("Mul", z, body.op("Sigmoid", z))
    if kind in (Activation.GELU, Activation.GELU_TANH) and body.variant.opset >= GELU_OPSET:
        return body.op("Gelu", z, approximate="none" if kind is Activation.GELU else "tanh")
    if kind is Activation.GELU:
        # (spelled as exporters write it, x * (1 + erf(x / sqrt 2)) * 0.5: ONNX Runtime fuses this form
        # into its Gelu kernel where no graphopt library runs the fused op, and not x * 0.5 * (...))
        erf = body.op("Erf", body.op("Div", z, body.const(math.sqrt(2.0))))
        return body.op("Mul", body.op("Mul", z, body.op("Add", erf, body.const(1.0))), body.const(0.5))
    half_z = body.op("Mul", z, body.const(0.5))
    if kind is Activation.GELU_TANH:
        # (the cube as Pow(x, 3), as exporters write GPT-2's gelu: ONNX Runtime fuses this form into its
        # FastGelu kernel, and not x * (x * x); tiny GPT-2 at opset 17 took 1.12x the original's time)
        cube = body.op("Pow", z, body.const(3.0))
        inner = body.op("Add", z, body.op("Mul", cube, body.const(0.044715)))
        t = body.op("Tanh", body.op("Mul", inner, body.const(math.sqrt(2.0 / math.pi))))
        return body.op("Mul", half_z, body.op("Add", t, body.const(1.0)))
    raise AssertionError(kind)


def normalized_input(body: Body) -> tuple[str, list[str]]:
    """X in the compute type, or X + Residual rounded to X's type (written as ResidualSum) where the
    variant adds one, as the unfused graph computes it; and the outputs the body produces."""
    s = body.to_compute("X")
    outputs = ["Y"]
    if "Residual" in body.variant.present:
        # Rounded to storage precision and normalized from there, as the unfused graph would.
        s = body.back_to_input_type(body.op("Add", s, body.to_compute("Residual")), "ResidualSum")
        if "ResidualSum" in body.variant.present:
            outputs.append("ResidualSum")
        if not body.in_input_type:
            s = body.to_float(s)
    return s, outputs


def optional_operand(body: Body, name: str) -> str | None:
    """Input ``name`` in the compute type, or None when the variant leaves it out."""
    return body.to_compute(name) if name in body.variant.present else None


def activated_norm(body: Body, axis: int) -> tuple[str, list[str]]:
    """act(norm(X [+ Residual]) * Scale + Bias) over [axis, rank), in X's type where the norm is one
    standard op, else in float32; and the outputs the body produces (NormAct's and NormActLinear's)."""
    v = body.variant
    if has_norm_op(v):
        body.compute_in_input_type()
    s, outputs = normalized_input(body)
    scale, bias = optional_operand(body, "Scale"), optional_operand(body, "Bias")
    return activate(body, v.attr("activation"), normalize(body, s, scale, bias, axis)), outputs


def decompose(variant: Variant) -> tuple[list[onnx.NodeProto], list[str]]:
    """The body nodes of ``variant`` and the names of the outputs it produces."""
    if variant.opset < MIN_OPSET:
        raise ValueError(
            f"default-domain opset {variant.opset} is not supported; expected {MIN_OPSET} or newer"
        )
    body = Body(variant)
    op = by_name(variant.op_name)
    outputs = importlib.import_module(f"{op.package}.decompose").body(body)
    return body.nodes, outputs
