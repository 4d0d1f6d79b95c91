"""Eager NormAct launches from a plan kept per signature: against a stand-in for the Triton kernel,
a plan launches with exactly the arguments the general path (``torch_triton``) passes, goes through
Triton's JIT only on its first call, and declines what it does not serve."""

import pytest
import torch
from fused_checks import assert_close

import graphopt.fused.norm_act.triton_kernel as kernel_module
from graphopt.fused import Activation, Norm
from graphopt.fused.norm_act import torch_impl as norm_act_impl
from graphopt.fused.norm_act import torch_launch_plan

CONSTEXPRS = ("BLOCK_M", "BLOCK_N", "ITERS", "LOOPED", "EVEN")
RUNTIME_ARGS = len(kernel_module.norm_act_kernel.arg_names) - len(CONSTEXPRS)


class Compiled:
    def __init__(self, log, takes):
        self.log, self.takes = log, takes

    def __getitem__(self, grid):
        def run(*args):
            if len(args) != self.takes:
                raise TypeError(f"function takes exactly {self.takes} arguments ({len(args)} given)")
            self.log.append(("direct", grid, args, {}))

        return run


class Kernel:
    """Records launches as ``norm_act_kernel`` is launched; its launcher takes ``takes`` arguments."""

    def __init__(self, takes=RUNTIME_ARGS + len(CONSTEXPRS)):
        self.arg_names = kernel_module.norm_act_kernel.arg_names
        self.log: list = []
        self.compiled = Compiled(self.log, takes)

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.log.append(("jit", grid, args, kwargs))
            return self.compiled

        return run


@pytest.fixture
def kernel(monkeypatch):
    stand_in = Kernel()
    monkeypatch.setattr(kernel_module, "norm_act_kernel", stand_in)
    monkeypatch.setattr(torch_launch_plan, "_current_device", lambda: None)  # (CPU tensors: index None)
    torch_launch_plan.clear()
    yield stand_in
    torch_launch_plan.clear()


def _planned(x, w, b, r=None, norm="layer", activation="gelu", axis=-1):
    return torch_launch_plan.norm_act(x, w, b, r, norm, activation, 1e-5, axis, norm_act_impl.parsed)


def _general(kernel, x, w, b, r=None, norm=Norm.LAYER, activation=Activation.GELU):
    norm_act_impl.launch(x, w, b, r, norm, activation, 1e-5, x.dim() - 1, wrap=lambda k: kernel)
    return kernel.log.pop()


def _same_launch(planned, general, has_residual):
    """Same grid, scalars and constexprs; the same input pointers (the outputs are fresh tensors)."""
    _, grid, args, kwargs = planned
    _, want_grid, want_args, want_kwargs = general
    assert grid == want_grid and args[6:] == want_args[6:]
    assert {**kwargs} == {**want_kwargs}
    inputs = (0, 1, 2, 3) if has_residual else (0, 2, 3)
    assert [args[i].data_ptr() for i in inputs] == [want_args[i].data_ptr() for i in inputs]


@pytest.mark.parametrize("with_residual", [False, True])
def test_a_plan_launches_as_the_general_path_does(kernel, with_residual):
    x = torch.randn(6, 5, 32)
    r = torch.randn(6, 5, 32) if with_residual else None
    w, b = torch.randn(32), torch.randn(32)

    y, residual_sum = _planned(x, w, b, r)

    assert y.shape == x.shape and y.is_contiguous()
    assert (residual_sum is not None) == with_residual
    _same_launch(kernel.log.pop(), _general(kernel, x, w, b, r), with_residual)


@pytest.mark.parametrize("takes", [RUNTIME_ARGS + len(CONSTEXPRS), RUNTIME_ARGS])
def test_only_the_first_call_goes_through_the_jit(kernel, takes):
    kernel.compiled.takes = takes
    x, w = torch.randn(4, 64), torch.randn(64)
    for _ in range(4):
        _planned(x, w, None)
    kinds = [entry[0] for entry in kernel.log]
    assert kinds == ["jit", "direct", "direct", "direct"]
    _, _, args, _ = kernel.log[-1]
    assert len(args) == takes
    first = kernel.log[0]
    assert args[:RUNTIME_ARGS][6:] == first[2][6:]  # the scalars as the JIT got them
    if takes > RUNTIME_ARGS:
        assert args[RUNTIME_ARGS:] == tuple(first[3][k] for k in CONSTEXPRS)


def test_a_new_signature_gets_a_plan_of_its_own(kernel):
    w = torch.randn(64)
    _planned(torch.randn(4, 64), w, None)
    _planned(torch.randn(8, 64), w, None)
    _planned(torch.randn(8, 64), w, None, activation="relu")
    assert [entry[0] for entry in kernel.log] == ["jit", "jit", "jit"]


def test_a_strided_row_view_is_launched_without_a_copy(kernel):
    x = torch.randn(8, 96)[:, :64]  # rows of 64, 96 apart
    _planned(x, None, None)
    _, _, args, _ = kernel.log.pop()
    assert args[0] is x and args[8] == 96


@pytest.mark.parametrize(
    "case",
    ["rows_need_a_copy", "strided_weight", "misaligned_pointer", "no_rows", "residual_of_another_shape"],
)
def test_what_a_plan_does_not_serve_goes_to_the_general_path(kernel, case):
    x, w, r = torch.randn(4, 6, 32), torch.randn(32), None
    if case == "rows_need_a_copy":
        x = torch.randn(6, 4, 32).transpose(0, 1)  # [4, 6] rows that no one stride walks
    elif case == "strided_weight":
        w = torch.randn(64)[::2]
    elif case == "misaligned_pointer":
        x = torch.randn(4 * 6 * 32 + 1)[1:].view(4, 6, 32)
    elif case == "no_rows":
        x = torch.randn(0, 6, 32)
    else:
        r = torch.randn(1, 6, 32)
    assert _planned(x, w, None, r) is None
    assert not [entry for entry in kernel.log if entry[0] == "direct"]


def test_bad_attributes_raise_as_the_op_does(kernel):
    with pytest.raises(ValueError, match="norm"):
        _planned(torch.randn(4, 32), None, None, norm="batch")
    assert not kernel.log


def test_the_plans_kept_are_bounded(kernel, monkeypatch):
    monkeypatch.setattr(torch_launch_plan, "MAX_PLANS", 3)
    for rows in range(1, 8):
        _planned(torch.randn(rows, 32), None, None)
    assert len(torch_launch_plan._PLANS) <= 3


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="runs the kernel through Triton's interpreter on CPU tensors"
)
@pytest.mark.parametrize("with_residual", [False, True])
def test_a_planned_launch_of_the_real_kernel_computes_norm_act(with_residual, monkeypatch):
    """(Triton's interpreter on a CPU, so each call goes through the JIT: the plan's arguments.)"""
    monkeypatch.setattr(torch_launch_plan, "_current_device", lambda: None)
    torch_launch_plan.clear()
    x = torch.randn(8, 96)[:, :64]
    r = torch.randn(8, 64) if with_residual else None
    w, b = torch.randn(64), torch.randn(64)

    y, residual_sum = _planned(x, w, b, r, norm="rms", activation="silu")

    s = x if r is None else x + r
    expected = torch.nn.functional.silu(torch.nn.functional.rms_norm(s, (64,), w, 1e-5) + b)
    assert_close(y, expected.double().numpy(), "float32")
    if with_residual:
        assert_close(residual_sum, s.double().numpy(), "float32")
    torch_launch_plan.clear()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_planned_op_calls_on_cuda_compute_what_the_reference_computes(dtype):
    from graphopt.fused import register_torch_ops, torch_math
    from graphopt.fused.norm_act import torch_math as norm_act_math

    ops, t = register_torch_ops(), getattr(torch, dtype)
    torch_launch_plan.clear()
    # aligned, masked, one row, 3-D, rows 32 elements apart
    for shape, pad in [((64, 256), 0), ((33, 100), 0), ((1, 1024), 0), ((2, 48, 768), 0), ((64, 256), 32)]:
        for _ in range(3):  # JIT, then the launcher's protocol found, then a direct launch
            padded = (*shape[:-1], shape[-1] + pad)
            x = torch.randn(*padded, device="cuda", dtype=t)[..., : shape[-1]]
            r = torch.randn(*shape, device="cuda", dtype=t)
            w, b = (torch.randn(shape[-1], device="cuda", dtype=t) for _ in range(2))
            y = ops.norm_act(x, w, b, "layer", "gelu", 1e-5, -1)
            want = norm_act_math.norm_act(x, w, b, Norm.LAYER, Activation.GELU, 1e-5, x.dim() - 1)
            assert_close(y.float().cpu(), want.float().double().cpu().numpy(), dtype)
            y, s = ops.add_norm_act(x, r, w, None, "rms", "silu", 1e-6, -1)
            total = torch_math.residual_sum(x, r)
            assert_close(s.float().cpu(), total.float().double().cpu().numpy(), dtype)
            want = norm_act_math.norm_act(total, w, None, Norm.RMS, Activation.SILU, 1e-6, x.dim() - 1)
            assert_close(y.float().cpu(), want.float().double().cpu().numpy(), dtype)
    plans = [p for p in torch_launch_plan._PLANS.values() if p is not torch_launch_plan._NO_PLAN]
    without_tail = [
        (p.shape, p.scalars, p.variant and p.variant.with_constexprs) for p in plans if p.tail is None
    ]
    assert plans and not without_tail
