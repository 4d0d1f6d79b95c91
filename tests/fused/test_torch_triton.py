"""The CUDA path of the torch ops (argument shaping, launcher calls, tracing), run where no GPU is:
Triton's interpreter executes the kernels on CPU tensors (tests/conftest.py sets TRITON_INTERPRET)."""

import os
import subprocess
import sys

import pytest
import torch
from fused_checks import assert_close

from graphopt.fused import Activation, Norm, register_torch_ops, torch_math
from graphopt.fused.norm_act import torch_impl as norm_act_impl
from graphopt.fused.norm_act import torch_math as norm_act_math
from graphopt.fused.norm_act_linear import torch_impl as norm_act_linear_impl
from graphopt.fused.norm_act_linear import torch_math as norm_act_linear_math

ops = register_torch_ops()
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
    reason="needs a GPU or Triton's interpreter",
)


def device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, device=device())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("norm", "activation"), [(Norm.LAYER, Activation.GELU), (Norm.RMS, Activation.SILU)], ids=["layer", "rms"]
)
def test_norm_act_launch_matches_torch_math(norm, activation, dtype):
    t = DTYPES[dtype]
    x, residual = randn(3, 4, 40, dtype=t), randn(3, 4, 40, dtype=t)
    weight, bias = randn(4, 40, dtype=t), randn(4, 40, dtype=t)

    y, residual_sum = norm_act_impl.launch(x, weight, bias, residual, norm, activation, 1e-5, 1)

    expected_sum = torch_math.residual_sum(x, residual)
    expected = norm_act_math.norm_act(expected_sum, weight, bias, norm, activation, 1e-5, 1)
    assert_close(residual_sum.float().cpu(), expected_sum.double().cpu().numpy(), dtype)
    assert_close(y.float().cpu(), expected.double().cpu().numpy(), dtype)


def test_norm_act_launch_on_strided_rows_without_parameters():
    x = randn(40, 6).t()

    y, residual_sum = norm_act_impl.launch(x, None, None, None, Norm.RMS, Activation.TANH, 1e-5, -1)

    assert residual_sum is None
    expected = norm_act_math.norm_act(x, None, None, Norm.RMS, Activation.TANH, 1e-5, 1)
    assert_close(y.cpu(), expected.double().cpu().numpy(), "float32")


@pytest.mark.parametrize("dtype", DTYPES)
def test_norm_act_linear_launch_matches_torch_math(dtype):
    t = DTYPES[dtype]
    args = (
        randn(2, 5, 32, dtype=t),
        randn(32, dtype=t),
        randn(32, dtype=t),
        randn(6, 32, dtype=t),
        randn(6, dtype=t),
    )
    params = (Norm.LAYER, Activation.RELU, 1e-5, Activation.SIGMOID)

    y, residual_sum = norm_act_linear_impl.launch(*args, *params)

    expected = norm_act_linear_math.norm_act_linear(*args, *params)
    assert y.shape == (2, 5, 6) and y.dtype == t and residual_sum is None
    assert_close(y.float().cpu(), expected.double().cpu().numpy(), dtype)


def chain(weight, linear_weight):
    def f(x, residual):
        y, s = ops.add_norm_act(x, residual, weight, None, "layer", "gelu", 1e-5, -1)
        z = ops.norm_act(y, weight, None, "rms", "silu", 1e-6, -1)
        return ops.norm_act_linear(z, weight, None, linear_weight, None, "layer", "relu", 1e-5, "tanh"), s

    return f


def chain_reference(x, residual, weight, linear_weight):
    s = torch_math.residual_sum(x, residual)
    y = norm_act_math.norm_act(s, weight, None, Norm.LAYER, Activation.GELU, 1e-5, 1)
    z = norm_act_math.norm_act(y, weight, None, Norm.RMS, Activation.SILU, 1e-6, 1)
    params = (Norm.LAYER, Activation.RELU, 1e-5, Activation.TANH)
    return norm_act_linear_math.norm_act_linear(z, weight, None, linear_weight, None, *params), s


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_registered_ops_on_cuda_run_the_kernels():
    weight, linear_weight = randn(256), randn(8, 256)
    x, residual = randn(64, 256), randn(64, 256)
    for got, want in zip(
        chain(weight, linear_weight)(x, residual),
        chain_reference(x, residual, weight, linear_weight),
        strict=True,
    ):
        assert_close(got.cpu(), want.double().cpu().numpy(), "float32")
    torch.library.opcheck(ops.add_norm_act.default, (x, residual, weight, None, "rms", "gelu", 1e-5, -1))
    torch.library.opcheck(
        ops.norm_act_linear.default, (x, weight, None, linear_weight, None, "layer", "relu", 1e-5, "tanh")
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_compile_on_cuda_matches_eager():
    weight, linear_weight = randn(256), randn(8, 256)
    compiled = torch.compile(chain(weight, linear_weight), fullgraph=True)
    for _ in range(2):  # fresh inputs and outputs each time: no stale memory can pass for a result
        x, residual = randn(64, 256), randn(64, 256)
        for got, want in zip(
            compiled(x, residual), chain_reference(x, residual, weight, linear_weight), strict=True
        ):
            assert_close(got.cpu(), want.double().cpu().numpy(), "float32")


TRACE_ON_FAKE_CUDA = """
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._subclasses.functional_tensor import dispatch_functionalize
from torch.fx.experimental.proxy_tensor import make_fx
from graphopt.fused import register_torch_ops

ops = register_torch_ops()
with FakeTensorMode():
    x, weight = torch.empty(4, 64, device="cuda"), torch.empty(64, device="cuda")
graph = make_fx(dispatch_functionalize(
    lambda x, w: ops.norm_act(x, w, None, "layer", "gelu", 1e-5, -1)), tracing_mode="fake")(x, weight)
kernels = [n for n in graph.graph.nodes if "triton_kernel_wrapper" in str(n.target)]
assert len(kernels) == 1, graph.graph
"""


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="the GPU runs test_compile_on_cuda_matches_eager instead"
)
def test_trace_on_fake_cuda_records_the_kernel():
    """What torch.compile does on a GPU, checked without one: the body traced on fake CUDA tensors.
    Triton's interpreter does not trace (wrap_triton runs interpreted kernels eagerly), so this runs
    in a fresh process without it."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", TRACE_ON_FAKE_CUDA], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
