"""NaN and infinities through the library's CPU kernels of every fused op, for every activation:
NaN exactly where the float64 reference has NaN (relu(NaN) is NaN, gelu and silu of -inf are NaN),
infinities where it has them, the rest close to it (tests/non_finite_cases.py)."""

import pytest
from non_finite_cases import affine_act, assert_same_specials, group_norm_act, norm_act, norm_act_linear

from graphopt.fused import Activation, Norm

ACTIVATIONS = [a.attr for a in Activation]
DTYPES = ["float32", "float16", "bfloat16"]


def check(run_fused, case, dtype):
    got = run_fused(case.op, case.inputs, case.attributes, dtype, case.outputs)
    for name, value, want in zip(case.outputs, got, case.reference, strict=True):
        assert_same_specials(value, want, dtype, f"{case.op} {case.attributes} {dtype} {name}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", [n.attr for n in Norm])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_norm_act(run_fused, activation, norm, dtype):
    check(run_fused, norm_act(norm, activation, dtype), dtype)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_norm_act_residual(run_fused, activation):
    check(run_fused, norm_act("layer", activation, "float32", residual=True), "float32")


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_norm_act_linear(run_fused, activation):
    check(run_fused, norm_act_linear(activation, "float32"), "float32")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_group_norm_act(run_fused, activation, dtype):
    check(run_fused, group_norm_act(activation, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_affine_act(run_fused, activation, dtype):
    check(run_fused, affine_act(activation, dtype), dtype)
