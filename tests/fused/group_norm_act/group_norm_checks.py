"""Running GroupNormAct's Triton launcher on random inputs and checking Y and ResidualSum against
the float64 reference of its spec (shared by the whole-kernel and split-kernel tests)."""

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "kernels"))
from kernel_checks import assert_matches, assert_written, device, f64, generator, poisoned

from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.group_norm_act.triton_kernel import launch_group_norm_act
from graphopt.fused.spec import Activation


def random(shape, dtype, gen, *, mean=0.0, std=1.0) -> torch.Tensor:
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * std + mean).to(dtype).to(device())


def run(shape, groups, dtype, act, *, scale=True, bias=True, residual=False, eps=1e-5, mean=0.0, std=1.0,
        scale_mean=1.0, scale_std=0.5, x=None):  # fmt: skip
    """Runs the launcher on fresh inputs (X: ``x`` where given) and checks Y (and ResidualSum) against
    the reference; returns the tier launched."""
    gen = generator(shape, groups, dtype, act, scale, bias, residual, eps, mean)
    x = random(shape, dtype, gen, mean=mean, std=std) if x is None else x.to(dtype).to(device())
    r = random(shape, dtype, gen) if residual else None
    w = random(shape[1], dtype, gen, mean=scale_mean, std=scale_std) if scale else None
    b = random(shape[1], dtype, gen, std=0.5) if bias else None
    numel = int(np.prod(shape))
    y, y_storage = poisoned(shape, dtype)
    s, s_storage = poisoned(shape, dtype) if residual else (None, None)

    tier = launch_group_norm_act(x, w, b, r, y, s, groups=groups, activation=int(act), eps=eps)

    what = f"GroupNormAct {list(shape)}/{groups} {dtype} {Activation(act).attr} [{tier.name}]"
    stored = None if r is None else f64((x.float() + r.float()).to(dtype))
    ref, _ = GROUP_NORM_ACT.reference(
        f64(x) if r is None else stored, f64(w), f64(b), groups=groups, activation=Activation(act).attr,
        epsilon=eps,
    )  # fmt: skip
    assert_written(y_storage, numel, what)
    assert_matches(y, ref, dtype, what)
    if residual:
        assert_written(s_storage, numel, what + " ResidualSum")
        assert_matches(s, stored, dtype, what + " ResidualSum")
    return tier
