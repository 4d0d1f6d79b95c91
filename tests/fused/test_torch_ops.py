import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from fused_checks import ACTIVATIONS, GRADIENT_PATHS, NORMS, assert_close
from torch.export import Dim

from graphopt.fused import NORM_ACT, NORM_ACT_LINEAR, register_torch_ops

ops = register_torch_ops()
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def randn(*shape, dtype=torch.float32, requires_grad=False):
    return torch.randn(*shape, dtype=dtype).requires_grad_(requires_grad)


def numpy64(t):
    return None if t is None else t.detach().double().numpy()


def norm_act_reference(x, weight, bias, residual, norm, activation, axis):
    y, residual_sum = NORM_ACT.reference(
        numpy64(x), numpy64(weight), numpy64(bias), numpy64(residual),
        norm=norm, activation=activation, epsilon=1e-5, axis=axis,
    )  # fmt: skip
    return y, residual_sum


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_norm_act_matches_reference(activation, norm, dtype):
    x, w, b = randn(4, 6, 40, dtype=DTYPES[dtype]), randn(40, dtype=DTYPES[dtype]), randn(40)

    y = ops.norm_act(x, w, b, norm, activation, 1e-5, -1)

    assert y.dtype == x.dtype and y.shape == x.shape
    assert_close(y.float(), norm_act_reference(x, w, b, None, norm, activation, -1)[0], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", NORMS)
def test_add_norm_act_returns_output_and_residual_sum(norm, dtype):
    x, r = randn(3, 5, 24, dtype=DTYPES[dtype]), randn(3, 5, 24, dtype=DTYPES[dtype])
    w, b = randn(5, 24, dtype=DTYPES[dtype]), randn(5, 24, dtype=DTYPES[dtype])

    y, residual_sum = ops.add_norm_act(x, r, w, b, norm, "gelu_tanh", 1e-5, 1)

    expected_y, expected_sum = norm_act_reference(x, w, b, r, norm, "gelu_tanh", 1)
    assert_close(y.float(), expected_y, dtype)
    assert_close(residual_sum.float(), expected_sum, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_norm_act_linear_matches_reference(activation, norm, dtype):
    out_activation = ACTIVATIONS[(ACTIVATIONS.index(activation) + 2) % len(ACTIVATIONS)]
    t = DTYPES[dtype]
    x, w, b, lw, lb = randn(2, 7, 48, dtype=t), randn(48, dtype=t), randn(48, dtype=t), randn(6, 48), None

    y = ops.norm_act_linear(x, w, b, lw, lb, norm, activation, 1e-5, out_activation)

    expected = NORM_ACT_LINEAR.reference(
        numpy64(x), numpy64(w), numpy64(b), numpy64(lw), None,
        norm=norm, activation=activation, epsilon=1e-5, out_activation=out_activation,
    )  # fmt: skip
    assert y.dtype == t and y.shape == (2, 7, 6)
    assert_close(y.float(), expected, dtype)


def test_norm_act_without_parameters_on_a_strided_input():
    x = randn(40, 6).t()  # rows of 40 elements, 6 apart

    y = ops.norm_act(x, None, None, "rms", "silu", 1e-5, -1)

    assert y.is_contiguous()
    assert_close(y, norm_act_reference(x, None, None, None, "rms", "silu", -1)[0], "float32")


def test_add_norm_act_outputs_are_contiguous_like_its_fake_on_transposed_inputs():
    x, r = randn(5, 3, 8).transpose(0, 1), randn(5, 3, 8).transpose(0, 1)
    w = randn(8)

    y, residual_sum = ops.add_norm_act(x, r, w, None, "layer", "identity", 1e-5, -1)

    assert y.is_contiguous() and residual_sum.is_contiguous()
    expected_y, expected_sum = norm_act_reference(x, w, None, r, "layer", "identity", -1)
    assert_close(y, expected_y, "float32")
    assert_close(residual_sum, expected_sum, "float32")


@pytest.mark.parametrize("path", GRADIENT_PATHS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_norm_act_gradients(activation, norm, path):
    args = [randn(3, 2, 5, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    w, b = (randn(2, 5, dtype=torch.float64, requires_grad=True) for _ in range(2))
    with GRADIENT_PATHS[path]():
        _check_norm_act_gradients(args, w, b, norm, activation)


def _check_norm_act_gradients(args, w, b, norm, activation):
    assert torch.autograd.gradcheck(
        lambda x, w, b: ops.norm_act(x, w, b, norm, activation, 1e-5, 1), (args[0], w, b), fast_mode=True
    )
    assert torch.autograd.gradcheck(
        lambda x, r, w, b: ops.add_norm_act(x, r, w, b, norm, activation, 1e-5, 1),
        (*args, w, b),
        fast_mode=True,
    )


@pytest.mark.parametrize("path", GRADIENT_PATHS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("activation", ["relu", "gelu", "silu"])
def test_norm_act_linear_gradients(activation, norm, path):
    tensors = [randn(*s, dtype=torch.float64, requires_grad=True) for s in [(3, 5), (5,), (5,), (4, 5), (4,)]]
    with GRADIENT_PATHS[path]():
        assert torch.autograd.gradcheck(
            lambda *t: ops.norm_act_linear(*t, norm, activation, 1e-5, "tanh"), tuple(tensors), fast_mode=True
        )


def test_half_precision_gradients_keep_input_dtypes():
    x = randn(4, 16, dtype=torch.float16, requires_grad=True)
    w = randn(16, requires_grad=True)
    ops.norm_act(x, w, None, "layer", "gelu", 1e-5, -1).float().sum().backward()
    assert x.grad.dtype == torch.float16 and w.grad.dtype == torch.float32

    x32 = x.detach().float().requires_grad_()
    w32 = w.detach().clone().requires_grad_()
    torch.nn.functional.gelu(torch.nn.functional.layer_norm(x32, (16,), w32)).sum().backward()
    assert_close(x.grad.float(), x32.grad.double().numpy(), "float16")


OPCHECK_CASES = {
    "norm_act": lambda: (ops.norm_act.default, (randn(3, 4, 8), randn(4, 8), None, "layer", "silu", 1e-5, 1)),
    "add_norm_act": lambda: (
        ops.add_norm_act.default,
        (randn(3, 8), randn(3, 8), randn(8), randn(8), "rms", "gelu", 1e-6, -1),
    ),
    "norm_act_linear": lambda: (
        ops.norm_act_linear.default,
        (randn(2, 3, 8), randn(8), randn(8), randn(5, 8), randn(5), "layer", "relu", 1e-5, "sigmoid"),
    ),
}


@pytest.mark.parametrize("case", list(OPCHECK_CASES))
def test_opcheck(case):
    op, args = OPCHECK_CASES[case]()
    with_grad = tuple(a.requires_grad_() if isinstance(a, torch.Tensor) else a for a in args)
    torch.library.opcheck(op, with_grad)


class AllOps(torch.nn.Module):
    def __init__(self, d=16, k=5):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(d))
        self.shift = torch.nn.Parameter(torch.randn(d))
        self.proj = torch.nn.Linear(d, k)

    def forward(self, x, residual):
        y, residual_sum = ops.add_norm_act(x, residual, self.scale, self.shift, "layer", "gelu", 1e-5, -1)
        y = ops.norm_act(y, self.scale, None, "rms", "silu", 1e-6, -1)
        out = ops.norm_act_linear(
            y, self.scale, self.shift, self.proj.weight, self.proj.bias, "layer", "relu", 1e-5, "tanh"
        )
        return out, residual_sum


def graphopt_targets(graph_module):
    return [
        str(n.target)
        for n in graph_module.graph.nodes
        if n.op == "call_function" and str(n.target).startswith("graphopt.")
    ]


def test_export_keeps_one_node_per_op_even_after_decompositions():
    args = (randn(4, 16), randn(4, 16))
    batch = Dim("batch")
    program = torch.export.export(AllOps(), args, dynamic_shapes={"x": {0: batch}, "residual": {0: batch}})
    expected = [
        "graphopt.add_norm_act.default",
        "graphopt.norm_act.default",
        "graphopt.norm_act_linear.default",
    ]
    assert graphopt_targets(program.graph_module) == expected
    decomposed = program.run_decompositions()
    assert graphopt_targets(decomposed.graph_module) == expected

    module = AllOps()
    module.load_state_dict(program.state_dict)
    x, r = randn(7, 16), randn(7, 16)
    for got, want in zip(decomposed.module()(x, r), module(x, r), strict=True):
        torch.testing.assert_close(got, want)


def test_compile_fullgraph_forward_and_backward():
    module = AllOps()
    x, r = randn(4, 16, requires_grad=True), randn(4, 16)
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")

    out, _ = compiled(x, r)
    out.sum().backward()
    grad = x.grad.clone()
    x.grad = None
    expected, _ = module(x, r)
    expected.sum().backward()

    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grad, x.grad)


@pytest.mark.slow
def test_inductor_compiles_the_cpu_implementation():
    module = AllOps()
    x, r = randn(4, 16), randn(4, 16)
    with torch.no_grad():
        compiled = torch.compile(module, fullgraph=True)(x, r)
        for got, want in zip(compiled, module(x, r), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ops.norm_act(randn(2, 8), None, None, "batch", "relu", 1e-5, -1), "unknown norm 'batch'"),
        (
            lambda: ops.norm_act(randn(2, 8), None, None, "rms", "swish", 1e-5, -1),
            "unknown activation 'swish'",
        ),
        (lambda: ops.norm_act(randn(2, 8), None, None, "rms", "relu", 1e-5, 2), "axis 2 is out of range"),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises((ValueError, RuntimeError), match=message):
        call()


def test_importing_the_package_does_not_import_torch():
    script = "import sys, graphopt.fused\nprint(sorted({'torch', 'onnx'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "torch" not in done.stdout


def offset_rows(*shape):
    return 1000.0 + 0.1 * randn(*shape)


@pytest.mark.parametrize(("shape", "axis"), [((16, 256), -1), ((4, 8, 96), 1)])
def test_norm_act_on_cpu_computes_what_the_native_ops_compute_on_offset_rows(shape, axis):
    x = offset_rows(*shape)
    normalized = shape[axis % len(shape) :]
    w, b = torch.rand(normalized) * 200.0, randn(*normalized)

    y = ops.norm_act(x, w, b, "layer", "gelu", 1e-5, axis)

    assert torch.equal(y, F.gelu(F.layer_norm(x, normalized, w, b, 1e-5)))


def test_norm_act_linear_on_cpu_computes_what_the_native_ops_compute_on_offset_rows():
    x, w, b, lw = offset_rows(16, 256), torch.rand(256) * 200.0, randn(256), randn(3, 256) / 16.0

    y = ops.norm_act_linear(x, w, b, lw, None, "layer", "tanh", 1e-5, "identity")

    assert torch.equal(y, F.linear(torch.tanh(F.layer_norm(x, (256,), w, b, 1e-5)), lw))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_add_norm_act_normalizes_the_sum_rounded_to_storage(dtype):
    x = torch.full((2, 8), 1000.0, dtype=DTYPES[dtype])
    r = (torch.linspace(0.05, 0.45, 8) * torch.tensor([[1.0], [-1.0]])).to(DTYPES[dtype])

    y, residual_sum = ops.add_norm_act(x, r, None, None, "layer", "identity", 1e-5, -1)

    stored = (x.float() + r.float()).to(DTYPES[dtype])
    assert torch.equal(residual_sum, stored)
    assert_close(y.float(), norm_act_reference(stored, None, None, None, "layer", "identity", -1)[0], dtype)
