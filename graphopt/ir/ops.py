"""The canonical op vocabulary: the ops passes reason about.

Frontends translate the ops they understand into these names (ONNX ``LayerNormalization`` and aten
``layer_norm`` both become ``Op.LAYER_NORM``) and carry every other op through verbatim under an
opaque name (``onnx:Conv``, ``aten:convolution.default``). Passes compare ``node.op`` with these
constants only, never with string literals.

Attributes of the canonical form (after canonicalization) are listed beside each op. A frontend may
produce a "raw" form whose tensor-valued parameters are still inputs (ONNX ``Reshape(x, shape)``);
the ``fold_shape_inputs`` pass turns constant ones into attributes, so rules match one form.
"""

from __future__ import annotations

from graphopt.fused.affine_act import AFFINE_ACT as _AFFINE_ACT_SPEC
from graphopt.fused.group_norm_act import GROUP_NORM_ACT as _GROUP_NORM_ACT_SPEC
from graphopt.fused.norm_act import NORM_ACT as _NORM_ACT_SPEC
from graphopt.fused.norm_act_linear import NORM_ACT_LINEAR as _NORM_ACT_LINEAR_SPEC


class Op:
    # Structure
    IDENTITY = "identity"
    RESHAPE = "reshape"  # shape: tuple[int] (0 copies the input dim, -1 infers), or raw: (x, shape)
    TRANSPOSE = "transpose"  # perm: tuple[int]
    SQUEEZE = "squeeze"  # axes: tuple[int]
    UNSQUEEZE = "unsqueeze"  # axes: tuple[int]
    SPLIT = "split"  # axis: int, sizes: tuple[int]; raw: (x, sizes?) with num_outputs
    SLICE = "slice"  # axes, starts, ends, steps: tuple[int]; raw: (x, starts, ends, axes?, steps?)
    GATHER = "gather"  # axis: int; inputs (data, indices)
    CONCAT = "concat"  # axis: int
    STACK = "stack"  # axis: int (torch.stack; ONNX spells it Unsqueeze + Concat)
    CAST = "cast"  # to: DType
    SHAPE = "shape"  # start: int = 0, end: int | None (ONNX Shape)
    CONSTANT = "constant"  # value: Tensor
    # A run-time check that x has the dtype its value already has in the IR; no outputs.
    ASSERT_METADATA = "assert_metadata"  # dtype: DType
    # Normalization
    LAYER_NORM = "layer_norm"  # axis: int, eps: float; inputs (x, scale?, bias?)
    RMS_NORM = "rms_norm"  # axis: int, eps: float; inputs (x, scale?)
    # x [N, C, *] normalized per (sample, group of C / groups channels); scale and bias per channel
    # (ONNX GroupNormalization before opset 21 scales per group: scale and bias have `groups` values
    # there; with C values they are per channel; the two agree when groups == C)
    GROUP_NORM = "group_norm"  # groups: int, eps: float; inputs (x, scale?, bias?)
    INSTANCE_NORM = (
        "instance_norm"  # eps: float; inputs (x, scale [C], bias [C]) (ONNX InstanceNormalization)
    )
    # Unary pointwise
    RELU = "relu"
    TANH = "tanh"
    GELU = "gelu"  # approximate: "none" | "tanh"
    SILU = "silu"
    SIGMOID = "sigmoid"
    ERF = "erf"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    RECIPROCAL = "reciprocal"
    EXP = "exp"
    NEG = "neg"
    # Binary pointwise (NumPy broadcasting)
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    POW = "pow"
    # Comparison and selection (index arithmetic that must keep a lookup's range check)
    LESS = "less"  # a < b, NumPy broadcasting; bool output
    WHERE = "where"  # inputs (condition, x, y), NumPy broadcasting
    # Reductions
    REDUCE_MEAN = "reduce_mean"  # axes: tuple[int], keepdims: bool; raw: (x, axes?)
    VAR_MEAN = "var_mean"  # axes, correction: int, keepdims: bool; outputs (var, mean) (aten var_mean)
    # Pooled embedding lookup: rows of table [V, D] at indices [..., L] (times per_sample_weights
    # [..., L] where given), summed or averaged over the bag axis L: [..., D]. ``offsets`` [M], where
    # given, is arange(0, numel(indices), L): the torch form reads it (graphopt/analysis/embedding_bag.py).
    EMBEDDING_BAG = "embedding_bag"  # mode: "sum" | "mean"; inputs (table, indices, weights?, offsets?)
    # N features' bags of different sizes (nn.EmbeddingBag with run-time offsets), pooled as one on
    # their tables concatenated: [N, B, D]. Inputs (table [R, D], bounds [N, 4], indices_0..N-1 [T_k],
    # offsets_0..N-1, weights_0..N-1?); the offsets mean what the original's did (analysis/jagged_bag.py).
    JAGGED_BAG = "jagged_bag"  # mode, form: "torch" | "onnx_loop" | "onnx_sequence", last_offset, counts
    # Linear algebra
    MATMUL = "matmul"  # NumPy matmul semantics, batched and broadcast
    LINEAR = "linear"  # x @ weight.T + bias; inputs (x, weight [K, D], bias?)
    # Fused ops of the graphopt domain ("graphopt.<name>"): spelled by their specs, one folder each
    # under graphopt/fused/; every fused op is known by ``graphopt.fused.by_ir_op``, named here or not.
    NORM_ACT = _NORM_ACT_SPEC.ir_op  # inputs (x, scale?, bias?, residual?); norm, activation, eps, axis
    # (x, scale?, bias?, weight, linear_bias?); attributes as NORM_ACT's + out_activation
    NORM_ACT_LINEAR = _NORM_ACT_LINEAR_SPEC.ir_op
    AFFINE_ACT = _AFFINE_ACT_SPEC.ir_op  # inputs (x, scale?, bias?) of [x.shape[axis]]; activation, axis
    GROUP_NORM_ACT = _GROUP_NORM_ACT_SPEC.ir_op  # (x, scale?, bias?, residual?); groups, activation, eps


UNARY_POINTWISE = frozenset(
    {Op.RELU, Op.TANH, Op.GELU, Op.SILU, Op.SIGMOID, Op.ERF, Op.SQRT, Op.RSQRT, Op.RECIPROCAL, Op.EXP, Op.NEG}
)
BINARY_POINTWISE = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW})
COMMUTATIVE = frozenset({Op.ADD, Op.MUL})
VIEWS = frozenset({Op.RESHAPE, Op.SQUEEZE, Op.UNSQUEEZE, Op.IDENTITY})


def is_canonical(op: str) -> bool:
    return ":" not in op


def opaque_name(frontend: str, name: str) -> str:
    """The op name of a node carried through verbatim: ``onnx:Conv``, ``aten:convolution.default``."""
    return f"{frontend}:{name}"
