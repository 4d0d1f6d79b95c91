"""The direct eager path of a custom op (``torch_direct``): where nothing below autograd would see the
call, the eager kernel runs at once, or, where a gradient is needed, the native ops the op stands for
(which autograd records itself); every other call goes through custom_op's autograd implementation,
so dispatch modes and tracing see the op as before."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from graphopt.fused import torch_direct

LIB = torch.library.Library("graphopt_direct_test", "FRAGMENT")
CALLS: list[str] = []


def _eager(x, factor):
    below_autograd = torch._C._dispatch_tls_is_dispatch_key_excluded(
        torch._C.DispatchKey.AutogradFunctionality
    )
    CALLS.append("redispatched" if below_autograd else "direct")
    return x * factor


def _math(x, factor):
    CALLS.append("math")
    return torch.mul(x, factor)


def _setup(ctx, inputs, output):
    ctx.factor = inputs[1]


def _backward(ctx, grad):
    return grad * ctx.factor, None


def _scale_op(name: str):
    """A custom op ``x * factor`` with its fake and its CPU kernel (``_eager``)."""

    def body(x: torch.Tensor, factor: float) -> torch.Tensor:
        return x * factor

    op = torch.library.custom_op(f"graphopt_direct_test::{name}", body, mutates_args=())
    op.register_fake(lambda x, factor: torch.empty_like(x))
    LIB.impl(name, _eager, "CPU")
    return op


scale = _scale_op("scale")
scale.register_autograd(_backward, setup_context=_setup)
torch_direct.register(LIB, scale, {"CPU": _eager})

native_scale = _scale_op("native_scale")
native_scale.register_autograd(_backward, setup_context=_setup)
torch_direct.register(LIB, native_scale, {"CPU": _eager}, _math)

formula_free_scale = _scale_op("formula_free_scale")
torch_direct.register(LIB, formula_free_scale, {"CPU": _eager}, _math, formula=False)


@pytest.fixture(autouse=True)
def _fresh_log():
    CALLS.clear()


def test_an_inference_call_skips_the_autograd_layer():
    x = torch.randn(3)
    torch.testing.assert_close(scale(x, 2.0), 2 * x, rtol=0, atol=0)
    weight = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        out = scale(weight, 3.0)
    assert out.grad_fn is None
    assert CALLS == ["direct", "direct"]


def test_a_call_that_needs_a_gradient_runs_the_native_ops_autograd_records():
    x = torch.randn(3, requires_grad=True)
    out = native_scale(x, 3.0)
    assert type(out.grad_fn).__name__ == "MulBackward0"
    (out * torch.arange(3.0)).sum().backward()
    torch.testing.assert_close(x.grad, 3.0 * torch.arange(3.0), rtol=0, atol=0)
    assert CALLS == ["math"]


def test_a_call_that_needs_a_gradient_of_an_op_given_no_formula_goes_through_autograd():
    x = torch.randn(3, requires_grad=True)
    scale(x, 3.0).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 3.0), rtol=0, atol=0)
    assert CALLS == ["redispatched"]


def test_a_dispatch_mode_still_sees_the_op():
    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Log():
        scale(torch.randn(3), 2.0)
    assert "graphopt_direct_test.scale.default" in seen


def test_torch_compile_traces_through_the_op():
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: scale(x, 2.0) + 1, fullgraph=True, backend="aot_eager")
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), 2 * x + 1, rtol=0, atol=0)


def test_torch_compile_differentiates_an_op_with_no_formula_through_its_native_ops():
    """A traced call that needs a gradient of an op with no autograd formula runs as its math, so the
    trace (and the backward derived from it) holds the native ops; without a gradient the op stays."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: formula_free_scale(x, 3.0) * x, fullgraph=True, backend="aot_eager")
    x = torch.randn(5, requires_grad=True)
    y = compiled(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, 6.0 * x.detach(), rtol=0, atol=0)
    assert CALLS and set(CALLS) == {"math"}  # (once per trace: dynamo's, then AOT autograd's)
    CALLS.clear()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), 3.0 * x * x, rtol=0, atol=0)
    assert "math" not in CALLS


def test_a_traced_call_of_an_op_with_a_formula_keeps_the_op():
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: native_scale(x, 3.0) * x, fullgraph=True, backend="aot_eager")
    x = torch.randn(5, requires_grad=True)
    (grad,) = torch.autograd.grad(compiled(x).sum(), x)
    torch.testing.assert_close(grad, 6.0 * x.detach(), rtol=0, atol=0)
    assert "math" not in CALLS


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_16_bit_call_that_needs_a_gradient_runs_as_the_unfused_program_in_its_precision(dtype):
    """layer_norm and GELU in the storage dtype, each rounding its own result, as the unfused program
    computes them: equal to it bit for bit, with no casts to float32 and back around the ops."""
    import graphopt.fused  # noqa: F401  (registers torch.ops.graphopt)

    gen = torch.Generator().manual_seed(7)
    x = (torch.randn(6, 64, generator=gen) * 3 + 100).to(dtype).requires_grad_()
    weight = (torch.randn(64, generator=gen) + 1).to(dtype).requires_grad_()
    bias = torch.randn(64, generator=gen).to(dtype).requires_grad_()
    unfused = torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (64,), weight, bias, 1e-5))

    with torch.profiler.profile() as profile:
        y = torch.ops.graphopt.norm_act(x, weight, bias, "layer", "gelu", 1e-5, -1)
    assert y.dtype == dtype and torch.equal(y, unfused)
    assert not [e.name for e in profile.events() if e.name in ("aten::to", "aten::_to_copy")]
    (grad_x,) = torch.autograd.grad(y.float().sum(), x)
    (want_x,) = torch.autograd.grad(unfused.float().sum(), x)
    assert torch.equal(grad_x, want_x)


def test_a_call_with_16_bit_input_and_float32_weights_computes_in_float32():
    """Operands of different precisions: the fused op's float32 math, rounded once (no operand's
    precision is lost to another's)."""
    import graphopt.fused  # noqa: F401

    gen = torch.Generator().manual_seed(8)
    x = torch.randn(6, 64, generator=gen).to(torch.float16).requires_grad_()
    weight = (torch.randn(64, generator=gen) + 1).requires_grad_()
    y = torch.ops.graphopt.norm_act(x, weight, None, "layer", "gelu", 1e-5, -1)
    want = torch.nn.functional.gelu(torch.nn.functional.layer_norm(x.float(), (64,), weight, None, 1e-5))
    assert y.dtype == torch.float16 and torch.equal(y, want.half())
