"""NaN and infinities through the fallback functions of every fused op (ONNX Runtime without the
library), for every activation: NaN exactly where the float64 reference has NaN, infinities where it
has them, the rest close to it (tests/non_finite_cases.py)."""

import pytest
from fused_checks import newest_ort_opset, session
from non_finite_cases import (
    affine_act,
    assert_same_specials,
    group_norm_act,
    node_model,
    norm_act,
    norm_act_linear,
)

from graphopt.fused import Activation, Norm
from graphopt.fused.onnx_functions import attach_functions

ACTIVATIONS = [a.attr for a in Activation]
DTYPES = ["float32", "float16"]
OPSETS = (18, newest_ort_opset())


def check(case, dtype, opset):
    model = node_model(case, dtype, opset)
    attach_functions(model)
    assert len(model.functions) == 1
    feeds = {name: value for name, value in case.inputs.items() if value is not None}
    got = session(model).run(None, feeds)
    for name, value, want in zip(case.outputs, got, case.reference, strict=True):
        assert_same_specials(value, want, dtype, f"{case.op} fallback {case.attributes} {dtype} {name}")


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", [n.attr for n in Norm])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_norm_act(activation, norm, dtype, opset):
    check(norm_act(norm, activation, dtype), dtype, opset)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_norm_act_residual(activation):
    check(norm_act("layer", activation, "float32", residual=True), "float32", 18)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_norm_act_linear(activation):
    check(norm_act_linear(activation, "float32"), "float32", 18)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_group_norm_act(activation, dtype, opset):
    check(group_norm_act(activation, dtype), dtype, opset)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_affine_act(activation, dtype):
    check(affine_act(activation, dtype), dtype, 18)
