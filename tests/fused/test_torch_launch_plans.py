"""Eager launches from a plan kept per call signature (``torch_launch_plans``): against a stand-in for
a Triton kernel, a plan launches with the arguments the general path passes, with the current call's
tensors, goes through Triton's JIT only on a signature's first call, allocates the scratch memory a
body asks for afresh on each call, and declines what it cannot replay; every fused op's CUDA launch
is planned; on the GPU, planned calls compute the reference."""

import pytest
import torch
from fused_checks import assert_close, python_kernel_ops

from graphopt.fused import Activation, Norm, torch_launch_plans, torch_math, torch_triton
from graphopt.fused.affine_act import torch_impl as affine_act_impl
from graphopt.fused.group_norm_act import torch_impl as group_norm_act_impl
from graphopt.fused.norm_act import torch_impl as norm_act_impl
from graphopt.fused.norm_act import torch_math as norm_act_math
from graphopt.fused.norm_act_linear import torch_impl as norm_act_linear_impl
from graphopt.fused.torch_ops import PLANNED


class Compiled:
    def __init__(self, log):
        self.log = log

    def __getitem__(self, grid):
        def run(*args):
            self.log.append(("direct", grid, args))

        return run


class Kernel:
    """Records launches as a ``@triton.jit`` kernel with parameters ``arg_names`` is launched."""

    def __init__(self, arg_names):
        self.arg_names = list(arg_names)
        self.log: list = []
        self.compiled = Compiled(self.log)

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.log.append(("jit", grid, args, kwargs))
            return self.compiled

        return run


KERNEL = Kernel(["X", "W", "Y", "cols", "BLOCK"])


def scale_rows(x, w, wrap):
    """A body as the fused ops' are: views, an output, one launch."""
    x2d = x.reshape(-1, x.shape[-1])
    y = torch.empty_like(x)
    wrap(KERNEL)[(x2d.shape[0],)](x2d, w, y, x2d.shape[1], BLOCK=16)
    return y


@pytest.fixture(autouse=True)
def _cpu_device(monkeypatch):
    monkeypatch.setattr(torch_launch_plans, "_current_device", lambda: None)
    KERNEL.log.clear()


def _kinds(kernel=KERNEL):
    return [entry[0] for entry in kernel.log]


def test_only_a_signatures_first_call_goes_through_the_jit_and_later_calls_launch_their_own_tensors():
    planned = torch_launch_plans.PlannedLaunches(scale_rows, lambda kernel: kernel)
    calls = [(torch.randn(4, 32), torch.randn(32)) for _ in range(3)]
    outputs = [planned(x, w) for x, w in calls]
    assert _kinds() == ["jit", "direct", "direct"]
    _, grid, args = KERNEL.log[-1]
    x, w = calls[-1]
    assert grid == (4, 1, 1)
    assert [a.data_ptr() for a in args[:3]] == [x.data_ptr(), w.data_ptr(), outputs[-1].data_ptr()]
    assert args[3:] == (32, 16)  # the scalars, then the constexpr the launcher takes with them
    assert outputs[-1].shape == x.shape and outputs[-1].dtype == x.dtype


def test_each_signature_gets_a_plan_of_its_own():
    planned = torch_launch_plans.PlannedLaunches(scale_rows, lambda kernel: kernel)
    w = torch.randn(32)
    planned(torch.randn(4, 32), w)
    planned(torch.randn(8, 32), w)
    planned(torch.randn(8, 32).double(), w.double())
    planned(torch.randn(4 * 32 + 1)[1:].view(4, 32), w)  # an address Triton would not call aligned
    assert _kinds() == ["jit"] * 4 and len(planned.kept()) == 4


def _copying_body(x, w, wrap):
    y = torch.empty(x.shape)
    wrap(KERNEL)[(1,)](x.contiguous(), w, y, x.shape[-1], BLOCK=16)
    return y


def _sliced_output_body(x, w, wrap):
    y = torch.empty(2 * x.numel())[: x.numel()].view(x.shape)
    wrap(KERNEL)[(1,)](x, w, y, x.shape[-1], BLOCK=16)
    return y


@pytest.mark.parametrize(
    ("body", "x", "w"),
    [
        (_copying_body, torch.randn(32, 4).t(), torch.randn(32)),  # a tensor of the body's own
        (scale_rows, *(2 * [torch.randn(32)])),  # one pointer, two inputs
        (_sliced_output_body, torch.randn(4, 32), torch.randn(32)),  # an output that is part of a tensor
    ],
    ids=["copy", "shared_pointer", "sliced_output"],
)
def test_what_a_plan_cannot_replay_keeps_the_general_path(body, x, w):
    planned = torch_launch_plans.PlannedLaunches(body, lambda kernel: kernel)
    for _ in range(3):
        planned(x, w)
    assert _kinds() == ["jit"] * 3 and not planned.kept()


STATS = Kernel(["X", "P", "cols"])
APPLY = Kernel(["X", "P", "Y", "cols"])


def two_pass_body(x, wrap):
    """A body as GroupNormAct's split launch is: a kernel writes partial results to scratch memory of
    the body's own, a second reads them."""
    partials = torch_triton.scratch(wrap, 2 * x.shape[0], torch.float32, x.device)
    y = torch.empty_like(x)
    wrap(STATS)[(x.shape[0],)](x, partials, x.shape[1])
    wrap(APPLY)[(x.shape[0],)](x, partials, y, x.shape[1])
    return y


def test_scratch_asked_for_is_allocated_afresh_by_each_planned_call():
    STATS.log.clear(), APPLY.log.clear()
    planned = torch_launch_plans.PlannedLaunches(two_pass_body, lambda kernel: kernel)
    calls = [torch.randn(4, 32) for _ in range(3)]
    outputs = [planned(x) for x in calls]
    assert _kinds(STATS) == _kinds(APPLY) == ["jit", "direct", "direct"] and len(planned.kept()) == 1
    scratches = set()
    later = zip(STATS.log[1:], APPLY.log[1:], calls[1:], outputs[1:], strict=True)
    for (_, _, stats_args), (_, _, apply_args), x, y in later:
        assert stats_args[0] is x and apply_args[0] is x and apply_args[2] is y
        partials = stats_args[1]
        assert apply_args[1] is partials  # one scratch tensor shared by the call's launches
        assert partials.shape == (8,) and partials.dtype == torch.float32 and partials.device == x.device
        assert all(partials.data_ptr() != t.data_ptr() for t in (x, y))
        scratches.add(id(partials))
    assert len(scratches) == 2


def test_without_a_plan_scratch_is_plain_memory():
    partials = torch_triton.scratch(lambda kernel: kernel, 5, torch.float16, torch.device("cpu"))
    assert partials.shape == (5,) and partials.dtype == torch.float16


def test_the_plans_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(torch_launch_plans, "MAX_PLANS", 3)
    planned = torch_launch_plans.PlannedLaunches(scale_rows, lambda kernel: kernel)
    for rows in range(1, 8):
        planned(torch.randn(rows, 32), torch.randn(32))
    assert len(planned.plans) <= 3


def _launches():
    """Each fused op's CUDA launch (``torch_impl.launch``) and arguments to it."""
    x, r, w, b = torch.randn(6, 8, 32), torch.randn(6, 8, 32), torch.randn(32), torch.randn(32)
    image, channels, shifts = torch.randn(2, 8, 3, 3), torch.randn(8), torch.randn(8)
    return {
        "norm_act": (norm_act_impl.launch, (x, w, b, None, Norm.LAYER, Activation.GELU, 1e-5, 2)),
        "add_norm_act": (norm_act_impl.launch, (x, w, None, r, Norm.RMS, Activation.SILU, 1e-6, 2)),
        "norm_act_per_slice": (
            norm_act_impl.launch,
            (x, torch.randn(6, 1, 32), torch.randn(6, 1, 32), None, Norm.LAYER, Activation.TANH, 1e-5, 2),
        ),
        "affine_act": (affine_act_impl.launch, (image, channels, shifts, Activation.RELU, 1)),
        "group_norm_act": (
            group_norm_act_impl.launch,
            (image, channels, None, None, 4, Activation.SILU, 1e-5),
        ),
        "add_group_norm_act": (
            group_norm_act_impl.launch,
            (image, None, channels, torch.randn(2, 8, 3, 3), 2, Activation.SILU, 1e-5),
        ),
        "add_group_norm_act_split": (  # 4 runs of 16384: the two split kernels and their scratch
            group_norm_act_impl.launch,
            (
                torch.randn(2, 8, 64, 64),
                None,
                torch.randn(8),
                torch.randn(2, 8, 64, 64),
                2,
                Activation.SILU,
                1e-5,
            ),
        ),
        "norm_act_linear": (
            norm_act_linear_impl.launch,
            (x, w, b, torch.randn(3, 32), None, Norm.LAYER, Activation.GELU, 1e-5, Activation.IDENTITY),
        ),
        "add_norm_act_linear": (
            norm_act_linear_impl.launch,
            (x, w, None, torch.randn(3, 32), torch.randn(3), Norm.RMS, Activation.SILU, 1e-6, Activation.TANH,
             r),
        ),
        "norm_act_linear_per_slice": (
            norm_act_linear_impl.launch,
            (x, torch.randn(6, 1, 32), torch.randn(6, 1, 32), torch.randn(6, 4, 32), torch.randn(6, 1, 4),
             Norm.LAYER, Activation.TANH, 1e-5, Activation.IDENTITY),
        ),
    }  # fmt: skip


def _stand_ins(launch, monkeypatch) -> list[Kernel]:
    """Replaces every Triton kernel of the op's kernel modules with a stand-in."""
    package = launch.__module__.rsplit(".", 1)[0]
    stand_ins = []
    for module_name in ("triton_kernel", "split_kernels"):
        try:
            module = __import__(f"{package}.{module_name}", fromlist=["_"])
        except ImportError:
            continue
        for name, value in list(vars(module).items()):
            if name.endswith("_kernel") and hasattr(value, "arg_names"):
                stand_ins.append(Kernel(value.arg_names))
                monkeypatch.setattr(module, name, stand_ins[-1])
    return stand_ins


@pytest.mark.parametrize("case", list(_launches()))
def test_every_fused_ops_launch_is_planned(case, monkeypatch):
    launch, args = _launches()[case]
    stand_ins = [k for k in _stand_ins(launch, monkeypatch)]
    planned = torch_launch_plans.PlannedLaunches(lambda *a, wrap: launch(*a, wrap=wrap), lambda k: k)
    results = [planned(*args) for _ in range(3)]
    launched = [k for k in stand_ins if k.log]
    assert len(launched) == (2 if case.endswith("_split") else 1)
    first = results[-1][0] if isinstance(results[-1], tuple) else results[-1]
    written = False
    for stand_in in launched:
        assert _kinds(stand_in) == ["jit", "direct", "direct"]
        (_, grid, jit_args, _), (_, direct_grid, direct_args) = stand_in.log[0], stand_in.log[-1]
        assert tuple(grid) + (1,) * (3 - len(grid)) == direct_grid
        scalars = [a for a in jit_args if not isinstance(a, torch.Tensor)]
        assert [a for a in direct_args if not isinstance(a, torch.Tensor)][: len(scalars)] == scalars
        written |= any(a.data_ptr() == first.data_ptr() for a in direct_args if isinstance(a, torch.Tensor))
    assert written


@pytest.mark.skipif(torch.cuda.is_available(), reason="runs the kernel through Triton's interpreter")
def test_under_the_interpreter_nothing_is_planned_and_calls_still_compute(monkeypatch):
    planned = torch_launch_plans.PlannedLaunches(
        lambda *a, wrap: norm_act_impl.launch(*a, wrap=wrap), lambda kernel: kernel
    )
    x, w, b = torch.randn(8, 64), torch.randn(64), torch.randn(64)
    for _ in range(2):
        y, _ = planned(x, w, b, None, Norm.RMS, Activation.SILU, 1e-5, 1)
    expected = torch.nn.functional.silu(torch.nn.functional.rms_norm(x, (64,), w, 1e-5) + b)
    assert_close(y, expected.double().numpy(), "float32")
    assert not planned.kept()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_planned_op_calls_on_cuda_compute_what_the_reference_computes(dtype):
    ops, t = python_kernel_ops(), getattr(torch, dtype)
    for planned in PLANNED.values():
        planned.clear()
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
            image = torch.randn(2, 8, *shape[-1:], device="cuda", dtype=t)
            channels, shifts = (torch.randn(8, device="cuda", dtype=t) for _ in range(2))
            y = ops.affine_act(image, channels, shifts, "relu", 1)
            want = torch.relu(image.float() * channels.float()[:, None] + shifts.float()[:, None])
            assert_close(y.float().cpu(), want.double().cpu().numpy(), dtype)
            y = ops.group_norm_act(image, channels, shifts, 4, "silu", 1e-5)
            want = torch.nn.functional.silu(
                torch.nn.functional.group_norm(image.float(), 4, channels.float(), shifts.float(), 1e-5)
            )
            assert_close(y.float().cpu(), want.double().cpu().numpy(), dtype)
    for name in ("norm_act", "add_norm_act", "affine_act", "group_norm_act"):
        kept = PLANNED[name].kept()
        assert kept and all(step.variant.with_constexprs is not None for p in kept for step in p.steps), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_planned_split_group_norm_calls_on_cuda_compute_what_the_reference_computes(dtype):
    ops, t = python_kernel_ops(), getattr(torch, dtype)
    PLANNED["add_group_norm_act"].clear()
    for _ in range(3):  # JIT, then direct launches with a fresh scratch buffer each
        x, r = (torch.randn(2, 16, 64, 64, device="cuda", dtype=t) for _ in range(2))  # 8 runs of 16384
        w, b = (torch.randn(16, device="cuda", dtype=t) for _ in range(2))
        y, s = ops.add_group_norm_act(x, r, w, b, 4, "silu", 1e-5)
        total = torch_math.residual_sum(x, r)
        assert torch.equal(s, total)
        want = torch.nn.functional.silu(
            torch.nn.functional.group_norm(total.float(), 4, w.float(), b.float(), 1e-5)
        )
        assert_close(y.float().cpu(), want.double().cpu().numpy(), dtype)
    (plan,) = PLANNED["add_group_norm_act"].kept()
    assert len(plan.steps) == 2 and len(plan.scratches) == 1
