"""fuse_bias_act: a bias add and the activation after it become one ``graphopt.AffineAct`` node.

``MatMul → Add(bias) → GELU / tanh-GELU / SiLU / ReLU / Sigmoid / Tanh`` is two passes over the hidden
activations of every transformer MLP (ONNX Runtime's optimizer fuses it as BiasGelu and FastGelu);
fused, the matmul's output is read once and the activation written once. Also fused:

* the bias add behind a view that keeps the last dim: the view moves before the fused op;
* an activation that the model spelled out in several elementwise ops (GPT-2's ``gelu_new``, recognized
  by ``recognize_activations``) with no bias before it (GPT-2's Conv1D adds its bias in a Gemm or an
  addmm): one kernel instead of a chain of pointwise ones. Not on a convolution's output: ONNX
  Runtime's CPU keeps that in its blocked channel layout (NCHWc) through the elementwise ops after it
  and fuses a spelled SiLU or GELU itself (QuickGelu, Gelu), so a fused op there saves no kernel and
  costs two layout reorders of the activations (EfficientNet: 64 more nodes in ORT's graph). Nor next to
  a Transpose: ONNX Runtime's transpose optimizer moves transposes through elementwise ops to cancel
  them, which it cannot do through a fused op (wav2vec2's feature extractor: 2 more Transposes).

A bias that is already a GEMM's own is left there: ``linear(x, W, b)``, and a bias added to a 2-D
matmul (ONNX Runtime makes MatMul + Add a Gemm, and Gemm + ReLU one FusedGemm; torch's addmm adds it in
the GEMM's epilogue), or to a matmul of any rank before a ReLU, sigmoid or tanh (ONNX Runtime's
FusedGemm). The activation after it is one pass either way. ``SPLIT_LINEAR_BIAS`` (not in the
pipeline) moves a linear's bias into the activation instead, for bench/bench_affine_act.py to measure.
"""

from __future__ import annotations

from graphopt.fused.affine_act import AFFINE_ACT
from graphopt.fused.onnx_decompose import MIN_OPSET as FALLBACK_MIN_OPSET
from graphopt.fused.spec import Activation
from graphopt.ir import DType, Node, Op, Value, constant_of
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

from ..canonicalize.fold_batch_norm import CONVOLUTIONS
from ..canonicalize.fold_onnx_batch_norm import ONNX_CONV
from ..recognize.origin import ORIGIN
from .activations import ACTIVATION_OPS, activation_of

# Activations ONNX Runtime's GemmActivationFusion folds into a Gemm (FusedGemm).
KERNEL_DTYPES = frozenset(DType[name.upper()] for name in AFFINE_ACT.dtypes)
FUSED_GEMM_ACTIVATIONS = frozenset({Activation.RELU, Activation.SIGMOID, Activation.TANH})


def check_fusable(x: Value, node: Node) -> Fail | None:
    """Why the fused kernels cannot take ``x`` (read by ``node``), or None."""
    opset = node.graph.meta.get("opset", {}).get("")
    if opset is not None and opset < FALLBACK_MIN_OPSET:
        return Fail(f"the model imports opset {opset}; fused ops need opset {FALLBACK_MIN_OPSET} or newer")
    if x.dtype not in KERNEL_DTYPES:
        return Fail(f"{x.name!r} is {x.dtype}; the fused kernels take float32, float16 and bfloat16")
    if x.rank is None or x.rank == 0 or not isinstance(x.shape[-1], int):
        return Fail(f"the last dim of {x.name!r} is unknown")
    return None


def bias_vector(x: Value, c: Value, add: Node) -> Value | Fail | None:
    """``c`` as a bias of x's last dim: ``c`` itself when it is [C], a [C] constant when it is a
    constant [1, ..., 1, C]; None when ``c`` is not shaped like a bias (a residual, a scalar)."""
    channels = x.shape[-1]
    if c.shape is None or not c.shape or c.shape[-1] != channels or any(d != 1 for d in c.shape[:-1]):
        return None
    if add.output.shape != x.shape:
        return None  # (x itself broadcasts: not a bias add)
    if c.dtype != x.dtype:
        return Fail(f"bias {c.name!r} is {c.dtype} but {x.name!r} is {x.dtype}")
    if c.rank == 1:
        return c
    tensor = constant_of(c)
    if tensor is None:
        return Fail(f"bias {c.name!r} of shape {list(c.shape)} is computed at run time")
    return tensor


def _bias_input(b, match) -> Value:
    bias = match.info["bias"]
    if isinstance(bias, Value):
        return bias
    array = bias.numpy().reshape(-1)
    name = f"{match.node('add').name}_bias"
    return b.constant(array, name, DType.from_numpy(array.dtype), derived_from=[match["c"]])


def bias_act_pattern(x, c):
    return op.any_of(*ACTIVATION_OPS)(op.add(x, c).named("add"))


def bias_first_pattern(x, c):
    return op.any_of(*ACTIVATION_OPS)(op.add(c, x).named("add"))


def gemm_with_bias(x: Value, activation: Activation) -> Fail | None:
    """A bias added to a 2-D matmul is a GEMM's own: ONNX Runtime fuses MatMul + Add into a Gemm,
    torch's addmm adds it in the GEMM's epilogue; and ONNX Runtime makes MatMul (of any rank) + Add +
    ReLU, sigmoid or tanh one FusedGemm. Taken out, the runtime's fusion would be lost."""
    producer = x.producer
    if producer is None or producer.op != Op.MATMUL:
        return None
    if x.rank == 2:
        return Fail(f"{x.name!r} is a 2-D matmul: its bias add belongs to the GEMM")
    if activation in FUSED_GEMM_ACTIVATIONS:
        return Fail(
            f"{x.name!r} is a matmul: ONNX Runtime fuses it, its bias and {activation.attr} in one FusedGemm"
        )
    return None


def check_bias_act(match):
    x, c, add = match["x"], match["c"], match.node("add")
    failure = check_fusable(x, match.root) or gemm_with_bias(x, activation_of(match.root))
    if failure:
        return failure
    bias = bias_vector(x, c, add)
    if bias is None or isinstance(bias, Fail):
        return bias
    return match.with_info(bias=bias)


def replace_bias_act(b, match):
    bias = _bias_input(b, match)
    return b.affine_act(match["x"], None, bias, activation=activation_of(match.root).attr, axis=-1)


def view_pattern(x, c):
    return op.any_of(*ACTIVATION_OPS)(op.reshape(op.add(x, c).named("add")).named("view"))


def view_bias_first_pattern(x, c):
    return op.any_of(*ACTIVATION_OPS)(op.reshape(op.add(c, x).named("add")).named("view"))


def check_view(match):
    view = match.node("view")
    if len(view.inputs) != 1 or "shape" not in view.attrs:
        return None  # (a raw reshape, its shape computed at run time)
    matched = check_bias_act(match)
    if not isinstance(matched, type(match)):
        return matched
    out = view.output
    if out.shape is None or not out.shape or out.shape[-1] != match["x"].shape[-1]:
        return Fail(f"view {view.name!r} changes the last dim the bias runs along")
    return matched


def replace_view(b, match):
    viewed = b.reshape(match["x"], shape=match.node("view").attrs["shape"])
    bias = _bias_input(b, match)
    return b.affine_act(viewed, None, bias, activation=activation_of(match.root).attr, axis=-1)


def spelled_pattern(x):
    return op.any_of(*ACTIVATION_OPS)(x)


def check_spelled(match):
    origin = match.root.meta.get(ORIGIN)
    if origin is None or len(origin.nodes) < 2:
        return None  # (one op in the model: one kernel already)
    x = match["x"]
    if x.producer is not None and x.producer.op in (*CONVOLUTIONS, ONNX_CONV):
        return Fail(
            f"{x.name!r} is a convolution's output, which ONNX Runtime keeps in its blocked channel "
            "layout through the spelled activation (fused there as one op): a fused op would cost two "
            "layout reorders"
        )
    around = [x.producer] if x.producer is not None else []
    around += match.root.output.users()
    transpose = next((n for n in around if n.op == Op.TRANSPOSE), None)
    if transpose is not None:
        return Fail(
            f"{transpose.name!r} transposes next to it: ONNX Runtime moves transposes through elementwise "
            "ops to cancel them, and fuses the spelled activation itself; a fused op there keeps the "
            "transposes"
        )
    return check_fusable(x, match.root) or match


def replace_spelled(b, match):
    return b.affine_act(match["x"], None, None, activation=activation_of(match.root).attr, axis=-1)


RULES = [
    Rule("fuse_bias_act", bias_act_pattern, replace_bias_act, check_bias_act),
    Rule("fuse_bias_act[bias_first]", bias_first_pattern, replace_bias_act, check_bias_act),
    Rule("fuse_bias_act_through_view", view_pattern, replace_view, check_view),
    Rule("fuse_bias_act_through_view[bias_first]", view_bias_first_pattern, replace_view, check_view),
    Rule("fuse_spelled_activation", spelled_pattern, replace_spelled, check_spelled),
]

PASS = rewrite_pass(
    "fuse_bias_act",
    "Fuse a bias add (+ a view keeping the last dim) and its activation into graphopt.AffineAct; an "
    "activation the model spelled out in elementwise ops becomes one AffineAct too.",
    RULES,
)


def linear_bias_act_pattern(x, w, c):
    return op.any_of(*ACTIVATION_OPS)(op.linear(x, w, c).named("linear"))


def check_linear_bias_act(match):
    x, c, linear = match["x"], match["c"], match.node("linear")
    failure = check_fusable(linear.output, match.root)
    if failure:
        return failure
    if c.rank != 1 or c.dtype != x.dtype:
        return Fail(f"bias {c.name!r} of {linear.name!r} is not a [features] vector of {x.dtype}")
    return match


def replace_linear_bias_act(b, match):
    product = b.linear(match["x"], match["w"])
    return b.affine_act(product, None, match["c"], activation=activation_of(match.root).attr, axis=-1)


SPLIT_LINEAR_BIAS = rewrite_pass(
    "split_linear_bias",
    "Move a linear layer's bias out of its GEMM into a graphopt.AffineAct with the activation after it.",
    [Rule("split_linear_bias_act", linear_bias_act_pattern, replace_linear_bias_act, check_linear_bias_act)],
)
