import numpy as np
import pytest
from onnx import helper
from ort_models import fused_model, random_inputs, run_model

pytestmark = pytest.mark.usefixtures("library")


def norm_act_inputs(**shapes):
    base = {"X": (3, 8), "Scale": (8,), "Bias": None}
    base.update(shapes)
    return random_inputs(np.random.default_rng(0), base, "float32")


def linear_inputs(weight=(4, 8), scale=(8,), linear_bias=(4,)):
    shapes = {"X": (3, 8), "Scale": scale, "Bias": None, "Weight": weight, "LinearBias": linear_bias}
    return random_inputs(np.random.default_rng(0), shapes, "float32")


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"norm": "batch"}, r"attribute 'norm' is 'batch'; expected one of: layer, rms"),
        (
            {"activation": "swish"},
            r"attribute 'activation' is 'swish'; expected one of: identity, relu, tanh, gelu",
        ),
        ({"epsilon": -1.0}, r"attribute 'epsilon' is -1\.0+; expected a finite value >= 0"),
        ({"epsilon": float("nan")}, r"attribute 'epsilon' is nan"),
        ({"epsilon": 1}, r"attribute 'epsilon' must be a float, found int"),
        ({"norm": 1}, r"attribute 'norm' must be a string, found int"),
        ({"axis": 1.5}, r"attribute 'axis' must be a int, found float"),
    ],
)
def test_norm_act_bad_attribute(attributes, message):
    inputs = norm_act_inputs()
    with pytest.raises(Exception, match=r"graphopt::NormAct node 'normact_0': " + message):
        run_model(fused_model("NormAct", inputs, attributes, "float32"), inputs)


@pytest.mark.parametrize("axis", [2, -3, 7])
def test_norm_act_axis_out_of_range(axis):
    inputs = norm_act_inputs(Scale=None)
    with pytest.raises(
        Exception, match=rf"attribute 'axis' is {axis}, out of range for X of shape \[3, 8\]; expected"
    ):
        run_model(fused_model("NormAct", inputs, {"axis": axis}, "float32"), inputs)


def test_norm_act_linear_bad_out_activation():
    inputs = linear_inputs()
    with pytest.raises(
        Exception,
        match=r"graphopt::NormActLinear node 'normactlinear_0': attribute 'out_activation' is 'GELU'",
    ):
        run_model(fused_model("NormActLinear", inputs, {"out_activation": "GELU"}, "float32"), inputs)


def test_scale_of_wrong_shape():
    # (a [3, 8] or [1, 8] scale would be read per row: broadcast_rows.h)
    inputs = norm_act_inputs(Scale=(2, 8))
    with pytest.raises(
        Exception, match=r"input Scale has shape \[2, 8\]; it is not a broadcast of X \(X has shape \[3, 8\]"
    ):
        run_model(fused_model("NormAct", inputs, {}, "float32"), inputs)


def test_residual_of_wrong_shape():
    inputs = norm_act_inputs(Residual=(4,))
    with pytest.raises(
        Exception, match=r"input Residual has shape \[4\]; it must end in the normalized dims X.shape"
    ):
        run_model(fused_model("NormAct", inputs, {}, "float32"), inputs)


def test_residual_sum_without_residual_fails_at_session_creation():
    inputs = norm_act_inputs()
    model = fused_model("NormAct", inputs, {}, "float32", outputs=("Y", "ResidualSum"))
    with pytest.raises(Exception, match=r"output ResidualSum is requested but input Residual is absent"):
        run_model(model, inputs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"weight": (4, 7)},
            r"input Weight must have shape \[K, 8\] or \[\.\.\., K, 8\] "
            r"\(X's last dimension is 8\), got \[4, 7\]",
        ),
        ({"weight": (32,)}, r"input Weight must have shape \[K, 8\]"),
        ({"scale": (4,)}, r"input Scale has shape \[4\]; expected \[8\] or a broadcast of it"),
        ({"linear_bias": (8,)}, r"input LinearBias has shape \[8\]; expected \[4\] or a broadcast of it"),
    ],
)
def test_norm_act_linear_bad_shapes(kwargs, message):
    inputs = linear_inputs(**kwargs)
    with pytest.raises(Exception, match=message):
        run_model(fused_model("NormActLinear", inputs, {}, "float32"), inputs)


def test_mixed_storage_types_are_refused():
    inputs = norm_act_inputs()
    model = fused_model("NormAct", inputs, {}, "float32")
    model.graph.input[1].type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(np.dtype("float16"))
    inputs["Scale"] = inputs["Scale"].astype(np.float16)
    with pytest.raises(Exception, match="NormAct"):
        run_model(model, inputs)
