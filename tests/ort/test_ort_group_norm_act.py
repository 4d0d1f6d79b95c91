"""GroupNormAct's ONNX Runtime CPU kernel (graphopt/fused/group_norm_act/ort_kernel.cc) against the
float64 reference, and its refusals of bad nodes."""

import numpy as np
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
from ort_models import assert_close, random_inputs, storage_round

from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.spec import Activation

DTYPES = ["float32", "float16", "bfloat16"]


def reference(inputs, groups, activation, epsilon=1e-5):
    return GROUP_NORM_ACT.reference(*inputs.values(), groups=groups, activation=activation, epsilon=epsilon)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", [a.attr for a in Activation])
def test_every_activation(run_fused, dtype, activation):
    inputs = random_inputs(np.random.default_rng(0), {"X": (2, 8, 3, 5), "Scale": (8,), "Bias": (8,)}, dtype)
    (y,) = run_fused("GroupNormAct", inputs, {"groups": 4, "activation": activation}, dtype)
    assert y.shape == (2, 8, 3, 5)
    assert_close(y, reference(inputs, 4, activation)[0], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ["gelu", "silu", "relu"])
def test_long_channels_with_an_offset_a_residual_and_two_threads(run_fused, dtype, activation):
    """Runs of 640 elements (channels of 320) through the kernel's vectorized row statistics."""
    rng = np.random.default_rng(5)
    shapes = {"X": (3, 6, 16, 20), "Scale": (6,), "Bias": (6,), "Residual": (3, 6, 16, 20)}
    inputs = random_inputs(rng, shapes, dtype)
    inputs["X"] = storage_round(inputs["X"].astype(np.float32) + 100.0, dtype)
    y, total = run_fused(
        "GroupNormAct",
        inputs,
        {"groups": 3, "activation": activation},
        dtype,
        ("Y", "ResidualSum"),
        threads=2,
    )
    stored = storage_round(inputs["X"].astype(np.float32) + inputs["Residual"].astype(np.float32), dtype)
    expected, _ = GROUP_NORM_ACT.reference(
        stored, inputs["Scale"], inputs["Bias"], groups=3, activation=activation, epsilon=1e-5
    )
    assert_close(total, stored, dtype)
    assert_close(y, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 6), (2, 6, 7), (1, 6, 2, 2, 3)])
def test_residual_sum_is_rounded_to_storage_and_returned(run_fused, dtype, shape):
    rng = np.random.default_rng(1)
    shapes = {"X": shape, "Scale": (6,), "Bias": None, "Residual": shape}
    inputs = random_inputs(rng, shapes, dtype)
    attributes = {"groups": 3, "activation": "silu"}
    y, total = run_fused("GroupNormAct", inputs, attributes, dtype, ("Y", "ResidualSum"), threads=2)
    stored = storage_round(inputs["X"].astype(np.float32) + inputs["Residual"].astype(np.float32), dtype)
    assert_close(total, stored, dtype)
    expected, _ = GROUP_NORM_ACT.reference(stored, inputs["Scale"], groups=3, activation="silu", epsilon=1e-5)
    assert_close(y, expected, dtype)


def test_large_common_offset_keeps_full_precision(run_fused):
    rng = np.random.default_rng(2)
    inputs = {
        "X": (1000.0 + 0.1 * rng.standard_normal((2, 4, 50))).astype(np.float32),
        "Scale": rng.uniform(0.0, 200.0, 4).astype(np.float32),
        "Bias": rng.standard_normal(4).astype(np.float32),
    }
    (y,) = run_fused("GroupNormAct", inputs, {"groups": 2, "activation": "identity"}, "float32")
    assert_close(y, reference(inputs, 2, "identity")[0], "float32")


def test_channels_that_do_not_split_into_groups_are_refused(run_fused):
    inputs = random_inputs(np.random.default_rng(3), {"X": (2, 6, 4)}, "float32")
    with pytest.raises(InvalidArgument, match="6 channels, which do not split into 4"):
        run_fused("GroupNormAct", inputs, {"groups": 4}, "float32")


def test_scale_of_another_length_is_refused(run_fused):
    inputs = random_inputs(np.random.default_rng(4), {"X": (2, 6, 4), "Scale": (3,)}, "float32")
    with pytest.raises(InvalidArgument, match=r"Scale \(\[C\]\)"):
        run_fused("GroupNormAct", inputs, {"groups": 3}, "float32")


def test_non_positive_groups_are_refused(run_fused):
    inputs = random_inputs(np.random.default_rng(5), {"X": (2, 6, 4)}, "float32")
    with pytest.raises(InvalidArgument, match="attribute 'groups' is 0; expected a positive number"):
        run_fused("GroupNormAct", inputs, {"groups": 0}, "float32")
