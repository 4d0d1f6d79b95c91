"""The cached launcher: against a stand-in for a Triton kernel that records how it is called, and on
the GPU against the reference math, call after call of one variant."""

import pytest
import torch
from fused_checks import assert_close

from graphopt.fused import Activation, Norm, register_torch_ops, torch_launch, torch_math
from graphopt.fused.norm_act import torch_math as norm_act_math


class Compiled:
    def __init__(self, log, takes: int):
        self.log, self.takes = log, takes

    def __getitem__(self, grid):
        def run(*args):
            if len(args) != self.takes:
                raise TypeError(f"function takes exactly {self.takes} arguments ({len(args)} given)")
            self.log.append(("direct", grid, args))

        return run


class Kernel:
    """``kernel(X, BLOCK: constexpr, n, eps, EVEN: constexpr)``; its launcher takes ``takes`` arguments."""

    def __init__(self, takes: int):
        self.arg_names = ["X", "BLOCK", "n", "eps", "EVEN"]
        self.log: list = []
        self.compiled = Compiled(self.log, takes)

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.log.append(("jit", grid, args, kwargs))
            return self.compiled

        return run


@pytest.fixture(autouse=True)
def _one_device(monkeypatch):
    monkeypatch.setattr(torch_launch, "current_device", lambda: 0)


def _launch(launcher, x, n=32, eps=1e-5, block=64):
    launcher[(4,)](x, n, eps, BLOCK=block, EVEN=True, num_warps=4)


@pytest.mark.parametrize("takes", [5, 3])
def test_a_variant_goes_through_the_jit_once_then_straight_to_its_launcher(takes):
    kernel = Kernel(takes)
    launcher = torch_launch.CachedLauncher(kernel)
    x = torch.zeros(64)
    _launch(launcher, x)
    _launch(launcher, x, n=48, eps=0.5)
    _launch(launcher, x, n=64)
    kinds = [entry[0] for entry in kernel.log]
    assert kinds == ["jit", "direct", "direct"]
    args = (x, 64, 48, 0.5, True) if takes == 5 else (x, 48, 0.5)  # constexprs at their positions
    assert kernel.log[1][1:] == ((4, 1, 1), args)
    assert not launcher.broken


def test_calls_triton_would_specialize_differently_are_new_variants():
    kernel = Kernel(5)
    launcher = torch_launch.CachedLauncher(kernel)
    x = torch.zeros(64)
    _launch(launcher, x)
    _launch(launcher, x, n=1)  # an int equal to 1
    _launch(launcher, x, n=40)  # not a multiple of 16
    _launch(launcher, x, n=1 << 40)  # beyond 32 bits
    _launch(launcher, x[1:])  # an address that is not 16-byte aligned
    _launch(launcher, x.double())
    _launch(launcher, x, block=128)  # another constexpr
    assert [entry[0] for entry in kernel.log] == ["jit"] * 7


def test_a_launcher_that_takes_neither_argument_list_falls_back_to_the_jit():
    kernel = Kernel(4)
    launcher = torch_launch.CachedLauncher(kernel)
    x = torch.zeros(64)
    for _ in range(3):
        _launch(launcher, x)
    assert [entry[0] for entry in kernel.log] == ["jit", "jit", "jit"]
    assert launcher.broken


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_eager_calls_launched_directly_compute_what_the_reference_computes(dtype, monkeypatch):
    from graphopt.fused.norm_act.triton_kernel import norm_act_kernel

    monkeypatch.setattr(torch_launch, "current_device", torch.cuda.current_device)
    ops, t = register_torch_ops(), getattr(torch, dtype)
    for rows, cols in [(64, 256), (33, 100), (1, 1024), (4096, 768)]:  # aligned, masked, one row, long
        for _ in range(3):  # the first call of a variant goes through Triton's JIT, the others do not
            x, r = (torch.randn(rows, cols, device="cuda", dtype=t) for _ in range(2))
            w, b = (torch.randn(cols, device="cuda", dtype=t) for _ in range(2))
            y = ops.norm_act(x, w, b, "layer", "gelu", 1e-5, -1)
            want = norm_act_math.norm_act(x, w, b, Norm.LAYER, Activation.GELU, 1e-5, 1)
            assert_close(y.float().cpu(), want.float().cpu(), dtype)
            y, s = ops.add_norm_act(x, r, w, b, "rms", "silu", 1e-6, -1)
            total = torch_math.residual_sum(x, r)
            assert_close(s.float().cpu(), total.float().cpu(), dtype)
            want = norm_act_math.norm_act(total, w, b, Norm.RMS, Activation.SILU, 1e-6, 1)
            assert_close(y.float().cpu(), want.float().cpu(), dtype)
    assert not torch_launch.cached(norm_act_kernel).broken
