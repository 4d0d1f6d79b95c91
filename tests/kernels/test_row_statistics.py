"""Row statistics of the Triton norms on rows that defeat a cheap shift: one element far from the
rest, at the start of the row (or group) and at its end, on every path (one block, several row
blocks, looped chunks). The values beside the far one must be as close to the float64 reference as
the op the fusion replaces (PyTorch's layer_norm, group_norm) brings them, or within TOL. (A shift by
the row's first element cost them a relative error of about D * 2^-24, 6e-5 at D = 1024, where
layer_norm's is 3e-7, and which the kernel tests' usual tolerance lets through on short rows.)"""

import numpy as np
import pytest
import torch
from kernel_checks import device, f64, generator, random_rows, random_vector

from graphopt.fused import NORM_ACT, NORM_ACT_LINEAR, Activation, Norm
from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.group_norm_act.triton_kernel import launch_group_norm_act
from graphopt.fused.norm_act.triton_kernel import launch_norm_act
from graphopt.fused.norm_act_linear.triton_kernel import launch_norm_act_linear

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FAR = 1e4  # the far element; the rest are N(0, 1)
TOL = 1e-6  # (relative, in the 2-norm over the values compared)


def rows_with_a_far_element(rows, cols, where, gen) -> torch.Tensor:
    x = random_rows(rows, cols, torch.float32, gen)
    x[:, where] = FAR
    return x


def relative_error(values, ref) -> float:
    return float(np.linalg.norm(f64(values) - ref) / np.linalg.norm(ref))


def assert_no_worse(kernel, native, ref, what):
    """``kernel`` and ``native`` (the unfused op's result) against the float64 ``ref``."""
    ours, theirs = relative_error(kernel, ref), relative_error(native, ref)
    assert ours <= max(TOL, theirs), f"{what}: relative error {ours:.3g}, the unfused op's {theirs:.3g}"


@pytest.mark.parametrize(
    ("rows", "cols", "expect"),
    [
        (3, 1000, "row_u"),
        (2, 1024, "exact_a_s"),
        (37, 240, "i2_row_a_s"),
        (3, 8208, "loop_a"),
        (2, 1500, "loop_u"),
    ],
)
@pytest.mark.parametrize("where", [0, -1])
def test_norm_act_with_one_element_far_from_the_rest(rows, cols, expect, where):
    gen = generator("far", rows, cols, where)
    x = rows_with_a_far_element(rows, cols, where, gen)
    scale = random_vector(cols, torch.float32, gen, mean=1.0, std=0.5)  # (a bias would hide the errors)
    y = torch.empty_like(x)

    config = launch_norm_act(
        x, scale, None, None, y, None, norm=Norm.LAYER, activation=Activation.IDENTITY, eps=1e-5
    )

    ref, _ = NORM_ACT.reference(
        f64(x), f64(scale), norm="layer", activation="identity", epsilon=1e-5, axis=-1
    )
    native = torch.nn.functional.layer_norm(x.cpu(), (cols,), scale.cpu(), None, 1e-5)
    keep = np.arange(cols) != where % cols
    assert_no_worse(y[:, keep], native[:, keep], ref[:, keep], f"NormAct far at {where} [{config.tier.name}]")
    assert config.tier.name.endswith(expect)


@pytest.mark.parametrize(
    ("rows", "cols", "expect"),
    [(3, 1000, "row_u"), (2, 1008, "row_a_s"), (2, 1024, "exact_a_s"), (2, 8208, "loop_a_s")],
)
def test_norm_act_linear_with_the_first_element_far_from_the_rest(rows, cols, expect):
    gen = generator("far linear", rows, cols)
    x = rows_with_a_far_element(rows, cols, 0, gen)
    weight = random_rows(3, cols, torch.float32, gen, std=cols**-0.5).contiguous()
    weight[:, 0] = 0.0  # (the far element's own normalized value would hide the others' errors)
    y = torch.empty(rows, 3, dtype=torch.float32, device=x.device)

    config = launch_norm_act_linear(
        x, None, None, weight, None, y, norm=Norm.LAYER, activation=Activation.IDENTITY,
        out_activation=Activation.IDENTITY, eps=1e-5,
    )  # fmt: skip

    ref = NORM_ACT_LINEAR.reference(
        f64(x), None, None, f64(weight), None, norm="layer", activation="identity", epsilon=1e-5,
        out_activation="identity",
    )  # fmt: skip
    native = torch.nn.functional.layer_norm(x.cpu(), (cols,), eps=1e-5) @ weight.cpu().T
    assert_no_worse(y, native, ref, f"NormActLinear far first element [{config.tier.name}]")
    assert config.tier.name.endswith(expect)


@pytest.mark.parametrize(("shape", "looped"), [((2, 4, 9, 9), False), ((2, 4, 75, 61), True)])
def test_group_norm_act_with_the_first_element_of_each_group_far_from_the_rest(shape, looped):
    x = torch.randn(shape, generator=generator("far group", shape), dtype=torch.float64)
    x = x.to(torch.float32).to(device())
    group = int(np.prod(shape[1:])) // 2
    flat = x.view(shape[0], -1)
    flat[:, 0] = flat[:, group] = FAR
    y = torch.empty_like(x)

    tier = launch_group_norm_act(
        x, None, None, None, y, None, groups=2, activation=int(Activation.IDENTITY), eps=1e-5
    )

    ref, _ = GROUP_NORM_ACT.reference(f64(x), groups=2, activation="identity", epsilon=1e-5)
    native = torch.nn.functional.group_norm(x.cpu(), 2, eps=1e-5)
    keep = np.ones(2 * group, bool)
    keep[[0, group]] = False
    flatten = lambda t: t.reshape(shape[0], -1)[:, keep]  # noqa: E731
    assert_no_worse(
        flatten(y), flatten(native), flatten(ref), f"GroupNormAct far first element [{tier.name}]"
    )
    assert tier.looped == looped
