import numpy as np
import pytest
from exporting import near_misses, op_types, optimize_checked, run_onnx
from onnx import TensorProto, helper, numpy_helper


def recognized(model, **options):
    """Optimizes without restore_unfused, which gives back what no fusion consumed: these tests look at
    what the recognizer itself made."""
    return optimize_checked(model, skip=("restore_unfused",), **options)


D = 8


def spelled_out_norm(norm: str, *, eps_shape=(), scale_shape=None, exponent=None, out_rank=2):
    """A layer or RMS norm in elementwise ops (opset 18), its epsilon of ``eps_shape``, an optional
    scale of ``scale_shape`` and ``Pow(·, exponent)`` for the square (else ``Mul``)."""
    square_of = "x" if norm == "rms" else "d"
    steps = [] if norm == "rms" else [("ReduceMean", ["x", "axes"], "mean"), ("Sub", ["x", "mean"], "d")]
    if exponent is None:
        steps.append(("Mul", [square_of, square_of], "square"))
    else:
        steps.append(("Pow", [square_of, "exponent"], "square"))
    steps += [
        ("ReduceMean", ["square", "axes"], "var"),
        ("Add", ["var", "eps"], "shifted"),
        ("Sqrt", ["shifted"], "std"),
        ("Div", [square_of, "std"], "normed" if scale_shape else "y"),
    ]
    inits = {
        "axes": np.array([-1], np.int64),
        "eps": np.full(eps_shape, 1e-5, np.float32),
        "exponent": np.array(exponent if exponent is not None else 2.0, np.float32),
    }
    if scale_shape:
        steps.append(("Mul", ["normed", "scale"], "y"))
        inits["scale"] = np.linspace(0.5, 2.0, D, dtype=np.float32).reshape(scale_shape)
    graph = helper.make_graph(
        [helper.make_node(op, inputs, [out]) for op, inputs, out in steps],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * out_rank)],
        [numpy_helper.from_array(a, n) for n, a in inits.items() if n != "exponent" or exponent is not None],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def inputs(positive=False):
    x = np.random.default_rng(5).standard_normal((4, D)) * 3
    return {"x": (np.abs(x) + 0.5 if positive else x).astype(np.float32)}


def float64_reference(norm, x, *, eps_shape=(), scale_shape=None, exponent=2.0):
    x = x.astype(np.float64)
    d = x - x.mean(-1, keepdims=True) if norm == "layer" else x
    y = d / np.sqrt((d**exponent).mean(-1, keepdims=True) + np.full(eps_shape, 1e-5))
    if scale_shape:
        y = y * np.linspace(0.5, 2.0, D, dtype=np.float32).astype(np.float64).reshape(scale_shape)
    return y


def assert_matches_reference(optimized, want, rtol=1e-5, atol=1e-5):
    (got,) = run_onnx(optimized, inputs(positive=True))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_epsilon_of_higher_rank_keeps_the_norm_spelled_out(norm):
    model = spelled_out_norm(norm, eps_shape=(1, 1, 1), out_rank=3)
    optimized, report = recognized(model, inputs=inputs(positive=True))
    assert not {"LayerNormalization", "RMSNormalization"} & set(op_types(optimized))
    rule = "layer_norm_from_ops[mul,div]" if norm == "layer" else "rms_norm_from_ops[mul,div]"
    assert "epsilon 'eps' of shape [1, 1, 1] is no scalar there" in near_misses(report, rule)
    want = float64_reference(norm, inputs(positive=True)["x"], eps_shape=(1, 1, 1))
    assert want.shape == (1, 4, D)
    assert_matches_reference(optimized, want)


@pytest.mark.parametrize("eps_shape", [(), (1,), (1, 1)])
def test_epsilon_that_broadcasts_into_existing_dims_is_recognized(eps_shape):
    optimized, _ = recognized(spelled_out_norm("layer", eps_shape=eps_shape), inputs=inputs(True))
    assert op_types(optimized) == ["LayerNormalization"]
    assert_matches_reference(optimized, float64_reference("layer", inputs(True)["x"], eps_shape=eps_shape))


def test_scale_of_higher_rank_is_not_folded():
    model = spelled_out_norm("layer", scale_shape=(1, 1, D), out_rank=3)
    optimized, report = recognized(model, inputs=inputs(True))
    assert op_types(optimized) == ["LayerNormalization", "Mul"]
    assert "'scale' ([1, 1, 8]) has more dims than 'x' (2)" in near_misses(report, "fold_norm_scale")
    want = float64_reference("layer", inputs(True)["x"], scale_shape=(1, 1, D))
    assert want.shape == (1, 4, D)
    assert_matches_reference(optimized, want)


def test_scale_with_leading_ones_within_the_rank_is_folded():
    optimized, report = recognized(spelled_out_norm("layer", scale_shape=(1, D)), inputs=inputs(True))
    assert op_types(optimized) == ["LayerNormalization"]
    assert report.rule_counts.get("fold_norm_scale") == 1
    assert_matches_reference(optimized, float64_reference("layer", inputs(True)["x"], scale_shape=(1, D)))


def test_a_power_near_two_is_not_a_square():
    model = spelled_out_norm("rms", exponent=2.0000005)
    optimized, report = recognized(model, inputs=inputs(positive=True))
    assert "Pow" in op_types(optimized)
    assert not any(rule.startswith("rms_norm_from_ops") for rule in report.rule_counts)
    want = float64_reference("rms", inputs(True)["x"], exponent=float(np.float32(2.0000005)))
    assert_matches_reference(optimized, want)


def test_a_power_of_exactly_two_is_a_square():
    optimized, report = recognized(spelled_out_norm("rms", exponent=2.0), inputs=inputs(positive=True))
    assert "Pow" not in op_types(optimized)
    assert report.rule_counts.get("rms_norm_from_ops[pow,div]") == 1
    assert_matches_reference(optimized, float64_reference("rms", inputs(True)["x"]))


def float64_layer_norm(eps: float):
    """A layer norm spelled out in float64 (opset 18), its epsilon a float64 constant."""
    steps = [
        ("ReduceMean", ["x", "axes"], "mean"),
        ("Sub", ["x", "mean"], "d"),
        ("Mul", ["d", "d"], "square"),
        ("ReduceMean", ["square", "axes"], "var"),
        ("Add", ["var", "eps"], "shifted"),
        ("Sqrt", ["shifted"], "std"),
        ("Div", ["d", "std"], "y"),
    ]
    graph = helper.make_graph(
        [helper.make_node(op, ins, [out]) for op, ins, out in steps],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4, D])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4, D])],
        [
            numpy_helper.from_array(np.array([-1], np.int64), "axes"),
            numpy_helper.from_array(np.array(eps), "eps"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def near_constant_rows():
    # (rows whose variance is far below epsilon: the normalized values are d / sqrt(eps), so they move
    # with any rounding of epsilon)
    return {"x": 3.0 + np.random.default_rng(6).standard_normal((4, D)) * 1e-4}


def test_a_float64_epsilon_that_float32_would_round_keeps_the_norm_spelled_out():
    model = float64_layer_norm(1e-5)
    optimized, report = recognized(model, inputs=near_constant_rows())
    assert "LayerNormalization" not in op_types(optimized)
    assert "epsilon 'eps' = 1e-05 is not a float32 number" in near_misses(
        report, "layer_norm_from_ops[mul,div]"
    )
    x = near_constant_rows()["x"]
    d = x - x.mean(-1, keepdims=True)
    want = d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5)
    (got,) = run_onnx(optimized, near_constant_rows())
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_a_float64_epsilon_that_is_a_float32_number_is_recognized():
    optimized, _ = recognized(float64_layer_norm(2.0**-17), inputs=near_constant_rows())
    assert op_types(optimized) == ["LayerNormalization"]
