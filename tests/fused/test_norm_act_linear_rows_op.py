"""NormActLinear with a residual (``add_norm_act_linear``, returning the sum too) and with operands read
row by row (per-slice scale, bias, weight matrices and linear bias; broadcast residuals): the torch
ops (math, gradients, opcheck, the CUDA path's launch) and the ONNX fallback function against the
spec's float64 reference."""

import os

import numpy as np
import pytest
import torch
from fused_checks import GRADIENT_PATHS, NORMS, assert_close, python_kernel_ops
from onnx import helper
from test_onnx_functions import OPSETS, make_model, random, run_fallback

from graphopt.fused import DOMAIN, NORM_ACT_LINEAR, Activation, Norm, register_torch_ops
from graphopt.fused.norm_act_linear import torch_impl, torch_math

ops = register_torch_ops()
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
PORTS = ("X", "Scale", "Bias", "Weight", "LinearBias", "Residual")


def randn(*shape, dtype=torch.float32, requires_grad=False):
    return torch.randn(*shape, dtype=dtype).requires_grad_(requires_grad)


def numpy64(t):
    return None if t is None else t.detach().double().numpy()


def reference(x, w, b, lw, lb, r, norm="layer", activation="tanh", out_activation="identity"):
    """Y of the float64 reference, with X + R rounded to X's type first (what the norm reads)."""
    s = x if r is None else (x.float() + r.float()).to(x.dtype)
    return NORM_ACT_LINEAR.reference(
        *map(numpy64, (s, w, b, lw, lb)), norm=norm, activation=activation, epsilon=1e-5,
        out_activation=out_activation,
    )  # fmt: skip


# name: shapes of X, Scale, Bias, Weight, LinearBias, Residual (None: absent)
CASES = {
    "residual": ((3, 5, 24), (24,), (24,), (4, 24), (4,), (3, 5, 24)),
    "broadcast_residual": ((2, 16, 32), (32,), None, (4, 32), (4,), (16, 32)),
    "per_feature_norms_shared_linear": ((8, 3, 16), (8, 1, 16), (8, 1, 16), (1, 16), (1,), None),
    "per_feature_linears": ((8, 3, 16), (8, 1, 16), (8, 1, 16), (8, 4, 16), (8, 1, 4), None),
    "everything": ((6, 5, 16), (6, 1, 16), (6, 1, 16), (6, 2, 16), (6, 1, 2), (5, 16)),
}


def tensors(case, dtype=torch.float32, requires_grad=False):
    return [None if s is None else randn(*s, dtype=dtype, requires_grad=requires_grad) for s in CASES[case]]


def call(x, w, b, lw, lb, r, norm="layer", activation="tanh", out_activation="identity", namespace=ops):
    """(Y, ResidualSum or None) through the torch op the inputs select."""
    if r is None:
        return namespace.norm_act_linear(x, w, b, lw, lb, norm, activation, 1e-5, out_activation), None
    return namespace.add_norm_act_linear(x, r, w, b, lw, lb, norm, activation, 1e-5, out_activation)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(CASES))
def test_matches_the_reference(case, dtype):
    x, w, b, lw, lb, r = tensors(case, DTYPES[dtype])

    y, total = call(x, w, b, lw, lb, r, "layer", "gelu", "sigmoid")

    assert y.shape == (*x.shape[:-1], lw.shape[-2]) and y.dtype == x.dtype
    assert_close(y.float(), reference(x, w, b, lw, lb, r, "layer", "gelu", "sigmoid"), dtype)
    if r is not None:
        assert torch.equal(total, (x.float() + r.float()).to(x.dtype))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_norm_reads_the_sum_rounded_to_storage(dtype):
    x = torch.full((2, 8), 1000.0, dtype=DTYPES[dtype])
    r = (torch.linspace(0.05, 0.45, 8) * torch.tensor([[1.0], [-1.0]])).to(DTYPES[dtype])
    lw = randn(3, 8, dtype=DTYPES[dtype])

    y, _ = call(x, None, None, lw, None, r, "layer", "identity")

    assert_close(y.float(), reference(x, None, None, lw, None, r, "layer", "identity"), dtype)


@pytest.mark.parametrize("path", GRADIENT_PATHS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("case", list(CASES))
def test_gradients(case, norm, path):
    given = tensors(case, torch.float64, requires_grad=True)
    if norm == "rms":
        given[2] = None
    present = [t for t in given if t is not None]

    def f(*args):
        it = iter(args)
        full = [None if t is None else next(it) for t in given]
        y, total = call(*full, norm, "silu", "tanh")
        return y if total is None else (y, total)

    with GRADIENT_PATHS[path]():
        assert torch.autograd.gradcheck(f, tuple(present), fast_mode=True)


@pytest.mark.parametrize("case", ["everything", "per_feature_linears", "residual"])
def test_opcheck(case):
    x, w, b, lw, lb, r = (None if t is None else t.requires_grad_() for t in tensors(case))
    if r is None:
        torch.library.opcheck(ops.norm_act_linear.default, (x, w, b, lw, lb, "layer", "relu", 1e-5, "tanh"))
    else:
        args = (x, r, w, b, lw, lb, "rms", "relu", 1e-5, "tanh")
        torch.library.opcheck(ops.add_norm_act_linear.default, args)


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (((8, 3, 16), (2, 8, 4, 16), None), r"linear_weight leading dims \[2, 8\] do not pick one matrix"),
        (((2, 3, 4, 5, 16), (2, 1, 4, 2, 16), None), r"linear_weight leading dims \[2, 1, 4\] do not pick"),
        (((8, 3, 16), (3, 4, 16), None), r"linear_weight leading dims \[3\] do not pick one matrix"),
        (((3, 16), (8, 4, 16), None), r"linear_weight leading dims \[8\] do not pick one matrix"),
        (((8, 3, 16), (4, 15), None), r"linear_weight shape \[4, 15\] is not \[K, 16\]"),
        (((8, 3, 16), (4, 16), (3, 1, 4)), r"linear_bias shape \[3, 1, 4\] is not a broadcast"),
    ],
)
def test_shapes_the_kernels_cannot_read_are_refused_by_name(shapes, message):
    x, lw, lb = (None if s is None else randn(*s) for s in shapes)
    with pytest.raises(Exception, match=message):
        ops.norm_act_linear(x, None, None, lw, lb, "layer", "relu", 1e-5, "identity")
    with pytest.raises(Exception, match=message):
        torch.library.opcheck(
            ops.norm_act_linear.default, (x, None, None, lw, lb, "layer", "relu", 1e-5, "tanh")
        )


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_fallback_function(case, norm, dtype, opset):
    shapes = dict(zip(PORTS, CASES[case], strict=True))
    if norm == "rms":
        shapes["Bias"] = None
    given = {name: shape for name, shape in shapes.items() if shape is not None}
    feeds = random(np.random.default_rng(0), given, dtype)
    outputs = ["Y"] + (["Sum"] if "Residual" in given else [])
    node = helper.make_node(
        "NormActLinear", [n if n in given else "" for n in PORTS], outputs, domain=DOMAIN,
        norm=norm, activation="gelu", epsilon=1e-5, out_activation="relu",
    )  # fmt: skip
    y_shape = (*given["X"][:-1], given["Weight"][-2])
    output_shapes = {"Y": y_shape, "Sum": given["X"]} if "Sum" in outputs else {"Y": y_shape}
    model = make_model([node], given, output_shapes, dtype, opset)

    got = run_fallback(model, feeds)

    t = {name: torch.from_numpy(feeds[name]) if name in feeds else None for name in PORTS}
    expected = reference(t["X"], t["Scale"], t["Bias"], t["Weight"], t["LinearBias"], t["Residual"],
                         norm, "gelu", "relu")  # fmt: skip
    assert_close(got["Y"], expected, dtype)
    if "Sum" in outputs:
        assert_close(got["Sum"], (feeds["X"].astype(np.float32) + feeds["Residual"]).astype(dtype), dtype)


@pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
    reason="needs a GPU or Triton's interpreter",
)
@pytest.mark.parametrize("case", list(CASES))
def test_the_cuda_path_reads_every_operand(case):
    # The torch op's launch (argument shaping, (inner, groups) per operand) against the plain math;
    # Triton's interpreter runs it where no GPU is.
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    x, w, b, lw, lb, r = (None if t is None else t.to(dev) for t in tensors(case))
    params = (Norm.LAYER, Activation.GELU, 1e-5, Activation.TANH)

    y, total = torch_impl.launch(x, w, b, lw, lb, *params, residual=r)

    s = x if r is None else (x + r)
    expected = torch_math.norm_act_linear(s.cpu(), *(None if t is None else t.cpu() for t in (w, b, lw, lb)),
                                          *params)  # fmt: skip
    assert_close(y.cpu(), expected.double().numpy(), "float32")
    if r is not None:
        assert torch.equal(total.cpu(), s.cpu())


@pytest.mark.parametrize("case", ["everything", "per_feature_linears"])
def test_eager_calls_that_need_gradients_run_the_native_ops(case):
    # (autograd records the ops the fusion replaced: the gradients are the unfused program's)
    given = tensors(case, torch.float64, requires_grad=True)
    y, total = call(*given, "layer", "gelu", "tanh")
    loss = y.square().sum() + (0.0 if total is None else total.sum())
    grads = torch.autograd.grad(loss, [t for t in given if t is not None])
    with torch.no_grad():
        want_y, _ = call(*given, "layer", "gelu", "tanh")
    assert torch.equal(y.detach(), want_y) and all(torch.isfinite(g).all() for g in grads)
    assert "Backward" in type(y.grad_fn).__name__ and "graphopt" not in type(y.grad_fn).__name__


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", list(CASES))
def test_planned_eager_calls_on_cuda_compute_the_reference(case, dtype):
    from graphopt.fused.torch_ops import PLANNED

    name = "norm_act_linear" if CASES[case][-1] is None else "add_norm_act_linear"
    namespace = python_kernel_ops()  # (the Python kernels, whose plan this checks)
    PLANNED[name].clear()
    for _ in range(3):  # the JIT, then launches from the plan
        x, w, b, lw, lb, r = (None if t is None else t.cuda() for t in tensors(case, DTYPES[dtype]))
        y, total = call(x, w, b, lw, lb, r, "layer", "gelu", "sigmoid", namespace)
        cpu = (None if t is None else t.cpu() for t in (x, w, b, lw, lb, r))
        assert_close(y.float().cpu(), reference(*cpu, "layer", "gelu", "sigmoid"), dtype)
        if r is not None:
            assert torch.equal(total, (x.float() + r.float()).to(x.dtype))
    assert PLANNED[name].kept()
