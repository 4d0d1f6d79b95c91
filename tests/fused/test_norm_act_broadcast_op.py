"""NormAct with operands broadcast over X's leading dims (per-slice scale and bias, broadcast
residuals): the torch ops (math, gradients, opcheck) and the ONNX fallback function against the
spec's float64 reference."""

import os

import numpy as np
import pytest
import torch
from fused_checks import GRADIENT_PATHS, NORMS, assert_close
from onnx import helper
from test_onnx_functions import OPSETS, make_model, random, run_fallback

from graphopt.fused import DOMAIN, NORM_ACT, Activation, Norm, register_torch_ops
from graphopt.fused.norm_act import torch_impl as norm_act_impl

ops = register_torch_ops()


def randn(*shape, dtype=torch.float32, requires_grad=False):
    return torch.randn(*shape, dtype=dtype).requires_grad_(requires_grad)


def numpy64(t):
    return None if t is None else t.detach().double().numpy()


def reference(x, w, b, r, norm, activation):
    tensors = (numpy64(t) for t in (x, w, b, r))
    return NORM_ACT.reference(*tensors, norm=norm, activation=activation, epsilon=1e-5, axis=-1)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_per_slice_scale_and_bias(norm, dtype):
    t = getattr(torch, dtype)
    x, w, b = randn(6, 4, 32, dtype=t), randn(6, 1, 32, dtype=t), randn(6, 1, 32, dtype=t)

    y = ops.norm_act(x, w, b, norm, "tanh", 1e-5, -1)

    assert_close(y.float(), reference(x, w, b, None, norm, "tanh")[0], dtype)


@pytest.mark.parametrize(("x_shape", "r_shape"), [((2, 16, 64), (1, 16, 64)), ((2, 32, 64), (32, 64))])
def test_broadcast_residual(x_shape, r_shape):
    x, r, w = randn(*x_shape), randn(*r_shape), randn(x_shape[-1])

    y, total = ops.add_norm_act(x, r, w, None, "layer", "identity", 1e-5, -1)

    expected_y, expected_sum = reference(x, w, None, r, "layer", "identity")
    assert total.shape == x.shape
    assert_close(y, expected_y, "float32")
    assert_close(total, expected_sum, "float32")


@pytest.mark.parametrize("path", GRADIENT_PATHS)
@pytest.mark.parametrize("norm", NORMS)
def test_gradients_reach_per_slice_weights_and_broadcast_residuals(norm, path):
    x = randn(3, 2, 5, dtype=torch.float64, requires_grad=True)
    r = randn(2, 5, dtype=torch.float64, requires_grad=True)
    w, b = (randn(3, 1, 5, dtype=torch.float64, requires_grad=True) for _ in range(2))
    with GRADIENT_PATHS[path]():
        assert torch.autograd.gradcheck(
            lambda x, w, b: ops.norm_act(x, w, b, norm, "gelu", 1e-5, -1), (x, w, b), fast_mode=True
        )
        assert torch.autograd.gradcheck(
            lambda x, r, w, b: ops.add_norm_act(x, r, w, b, norm, "silu", 1e-5, -1),
            (x, r, w, b),
            fast_mode=True,
        )


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("norm_act", lambda: (randn(4, 3, 8), randn(4, 1, 8), randn(4, 1, 8), "layer", "silu", 1e-5, -1)),
        ("add_norm_act", lambda: (randn(2, 3, 8), randn(3, 8), randn(8), None, "rms", "relu", 1e-6, -1)),
    ],
)
def test_opcheck(op, args):
    with_grad = tuple(a.requires_grad_() if isinstance(a, torch.Tensor) else a for a in args())
    torch.library.opcheck(getattr(ops, op).default, with_grad)


def test_a_residual_that_is_no_broadcast_of_x_is_refused_by_name():
    with pytest.raises(Exception, match=r"residual shape \[4, 8\] is not a broadcast of X's \[2, 3, 8\]"):
        ops.add_norm_act(randn(2, 3, 8), randn(4, 8), None, None, "layer", "relu", 1e-5, -1)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(
    "shapes",
    [
        {"X": (4, 3, 16), "Scale": (4, 1, 16), "Bias": (4, 1, 16)},
        {"X": (2, 3, 16), "Scale": (16,), "Residual": (3, 16)},
        {"X": (2, 3, 16), "Residual": (1, 3, 16), "Bias": (2, 1, 16)},
    ],
    ids=["per_slice", "residual_2d", "residual_3d_bias_per_slice"],
)
def test_fallback_function_broadcasts_the_same_way(shapes, norm, opset):
    if norm == "rms" and "Bias" in shapes:
        shapes = {k: v for k, v in shapes.items() if k != "Bias"}
    feeds = random(np.random.default_rng(0), shapes, "float32")
    names = ["X", "Scale", "Bias", "Residual"]
    outputs = ["Y"] + (["Sum"] if "Residual" in shapes else [])
    node = helper.make_node(
        "NormAct", [n if n in shapes else "" for n in names], outputs, domain=DOMAIN,
        norm=norm, activation="gelu", epsilon=1e-5, axis=-1,
    )  # fmt: skip
    model = make_model([node], shapes, dict.fromkeys(outputs, shapes["X"]), "float32", opset)

    got = run_fallback(model, feeds)

    y, total = NORM_ACT.reference(
        feeds["X"], feeds.get("Scale"), feeds.get("Bias"), feeds.get("Residual"),
        norm=norm, activation="gelu", epsilon=1e-5, axis=-1,
    )  # fmt: skip
    assert_close(got["Y"], y, "float32")
    if total is not None:
        assert_close(got["Sum"], total, "float32")


@pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
    reason="needs a GPU or Triton's interpreter",
)
@pytest.mark.parametrize(
    ("x_shape", "w_shape", "r_shape"),
    [
        ((4, 3, 40), (4, 1, 40), None),
        ((2, 16, 64), (64,), (1, 16, 64)),
        ((3, 2, 24), (3, 1, 24), (2, 24)),
        ((2, 5, 24), (24,), (24,)),  # a residual of the normalized shape: one row for all
        ((4, 3, 40), (4, 3, 40), None),  # a scale and bias of X's own shape: one row per row
        # Slices of 8 rows in blocks of 4 (float32's 512-wide tier): every block inside one
        # slice; slices of 6 rows: some blocks inside one slice, some across two; a row longer
        # than any block, walked in chunks.
        ((3, 8, 512), (3, 1, 512), None),
        ((3, 6, 512), (3, 1, 512), (6, 512)),
        ((2, 3, 8208), (2, 1, 8208), None),
    ],
)
def test_the_cuda_path_reads_broadcast_operands(x_shape, w_shape, r_shape):
    # The torch op's launch (argument shaping, (inner, groups) per operand) against the plain math;
    # Triton's interpreter runs it where no GPU is.
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    x, w, b = randn(*x_shape).to(dev), randn(*w_shape).to(dev), randn(*w_shape).to(dev)
    r = None if r_shape is None else randn(*r_shape).to(dev)

    y, total = norm_act_impl.launch(x, w, b, r, Norm.LAYER, Activation.GELU, 1e-5, x.dim() - 1)

    expected_y, expected_sum = reference(
        x.cpu(), w.cpu(), b.cpu(), None if r is None else r.cpu(), "layer", "gelu"
    )
    assert_close(y.cpu(), expected_y, "float32")
    if r is not None:
        assert_close(total.cpu(), expected_sum, "float32")
