"""What a fused op is: the ``FusedOp`` spec each op's folder fills in, and the vocabulary the ops
share (domain, storage types, activations, norms).

Each fused op lives in one folder, ``graphopt/fused/<op>/`` (``registry`` lists them): its
``spec.py`` defines the op once (ports, attributes, dtypes, shape rule, torch forms, float64
reference), and everything else is derived from that definition:

* the IR op and its shape inference, both frontends' translations, both emitters, the pictures;
* the ONNX schema in domain ``graphopt`` (version 1) and the model-local fallback function, whose
  body the op's ``decompose.py`` builds;
* the PyTorch ops ``torch.ops.graphopt.<form>`` (bodies in the op's ``torch_impl.py``) and their
  translation back to ONNX by both torch exporters;
* the ONNX Runtime library's enums, attribute structs and readers, port tables and registration
  list (C++ generated at build time by ``graphopt.fused.cpp_codegen``), and the table of
  ahead-of-time kernels (the op's ``triton_kernel.py`` declares its ``AOT_KERNEL``).

The integer codes of ``Activation``, ``Norm`` and ``DTYPES`` are part of the kernel ABI (Triton
kernels and the C++ library take them as plain integers): never renumber, only append.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

DOMAIN = "graphopt"
DOMAIN_VERSION = 1
# Storage types every kernel accepts, in ABI order (the C++ DType enum's codes).
DTYPES = ("float32", "float16", "bfloat16")
# What element type a port takes: the op's storage type (X's: one of DTYPES, the same for every such
# port); indices (int32 or int64, whichever the caller has: an embedding lookup's ids); or int64.
# Append only: the C++ PortElement enum takes these codes in this order.
STORAGE, INDEX, INT64 = "storage", "index", "int64"
PORT_ELEMENTS = (STORAGE, INDEX, INT64)


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


def activation_reference(kind: Activation, x):
    """Float64 reference of each activation."""
    import numpy as np

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


def norm_reference(norm: Norm, x, scale, bias, eps: float, axis: int):
    """Float64 reference of a layer or RMS norm over dimensions [axis, rank)."""
    import numpy as np

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


Shape = tuple | None  # a tensor's dims (ints, symbolic strings or None), or None when unknown


@dataclass(frozen=True)
class Port:
    name: str  # the ONNX name (schema, fallback function)
    optional: bool = False
    doc: str = ""
    torch: str = ""  # its argument name in the torch ops; default: the name in lower case
    needs: str = ""  # an optional output only given with this optional input (ResidualSum: Residual)
    element: str = STORAGE  # its element type (PORT_ELEMENTS); outputs are always of the storage type

    @property
    def torch_name(self) -> str:
        return self.torch or self.name.lower()


@dataclass(frozen=True)
class Attribute:
    name: str  # the ONNX name
    kind: type  # str, float, int, or an enum whose members' ``attr`` are the accepted strings
    default: object
    doc: str = ""
    key: str = ""  # its name in the IR and the torch ops; default: the ONNX name
    tag: str = "{}"  # how the fallback function's overload name spells a value (see ``spell``)
    minimum: float | None = None  # a float attribute must be finite and at least this

    @property
    def ir_name(self) -> str:
        return self.key or self.name

    @property
    def choices(self) -> type[enum.Enum] | None:
        return self.kind if isinstance(self.kind, type) and issubclass(self.kind, enum.Enum) else None

    @property
    def value_type(self) -> type:
        """The Python type of the value an ONNX node or a torch call carries."""
        return str if self.choices is not None else self.kind

    def spell(self, value) -> str:
        """The value in an overload name: ``gelu``, ``eps1e-05``, ``axis-1``."""
        if self.choices is not None:
            text = self.kind.parse(value).attr if isinstance(value, str) else value.attr
        elif self.kind is float:
            text = format_float32(value)
        else:
            text = str(value)
        return self.tag.format(text)


def format_float32(value: float) -> str:
    """The shortest text that reads back as the same float32 (ONNX stores float attributes as float32)."""
    import numpy as np

    return str(np.float32(value))


@dataclass(frozen=True)
class TorchForm:
    """One ``torch.ops.graphopt`` op serving a fused op when the given optional ports are present.

    ``inputs`` and ``outputs`` are port names in the torch op's argument and result order; the
    attributes follow the inputs, in the spec's order. An input listed in ``required`` is a plain
    Tensor even where the port is optional (the form exists for it). A form serves a node when the
    node's present optional inputs are exactly those the form lists, less ``Tensor?`` ones absent.
    """

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    required: frozenset[str] = frozenset()


@dataclass(frozen=True)
class FusedOp:
    name: str  # ONNX op_type in domain "graphopt"; the C++ spec is ``<name>Spec``
    ir_name: str  # the IR op is "graphopt.<ir_name>"
    package: str  # the op's folder as a module path: decompose, torch_impl, triton_kernel live there
    doc: str
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    attributes: tuple[Attribute, ...]
    torch_forms: tuple[TorchForm, ...]
    # (present, shapes) -> output shapes: ``present`` says which inputs the node has, ``shapes``
    # holds their shapes (None where absent or unknown). Outputs take the first input's element type.
    shape_rule: Callable[[Sequence[bool], Sequence[Shape]], list[Shape]]
    # (attrs, present) -> the words a picture shows beside the name (norm, activation, ...).
    describe: Callable[[dict, Sequence[bool]], list[str]] = field(default=lambda attrs, present: [])
    dtypes: tuple[str, ...] = DTYPES
    reference: object = field(default=None, compare=False, repr=False)

    @property
    def ir_op(self) -> str:
        return f"{DOMAIN}.{self.ir_name}"

    def port_index(self, name: str) -> int:
        return [p.name for p in self.inputs].index(name)

    def attribute(self, name: str) -> Attribute:
        return next(a for a in self.attributes if a.name == name)

    def form_for(self, present: Sequence[bool]) -> TorchForm:
        """The torch form serving a node whose inputs are ``present`` (one flag per input port)."""
        given = {p.name for p, here in zip(self.inputs, present, strict=False) if here}
        for form in self.torch_forms:
            if form.required <= given and given <= set(form.inputs):
                return form
        raise ValueError(f"{self.name}: no torch op takes the inputs {sorted(given)}")

    def form_named(self, name: str) -> TorchForm:
        return next(f for f in self.torch_forms if f.name == name)
