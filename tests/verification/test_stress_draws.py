import ml_dtypes
import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import graphopt
from graphopt.files import model_files
from graphopt.ir import DType
from graphopt.runtime.runners import run_program_many
from graphopt.verification.checking import Reference, prepare_draws
from graphopt.verification.compare import verify_models
from graphopt.verification.draws import random_draws
from graphopt.verification.numeric import Tolerance, compare

SPECS = {
    "x32": (DType.FLOAT32, (3, 16)),
    "x16": (DType.FLOAT16, (3, 16)),
    "xbf": (DType.BFLOAT16, (2, 8)),
    "index": (DType.INT64, (3,)),
    "flag": (DType.BOOL, ()),
}


def by_name(draws):
    return {draw.name: draw.feeds for draw in draws}


def test_draws_stress_each_float_dtype_and_keep_the_rest():
    draws = by_name(random_draws(SPECS, seed=3))
    assert list(draws) == ["normal", "offset", "large", "constant rows"]
    for feeds in draws.values():
        assert {n: (a.dtype, a.shape) for n, a in feeds.items()} == {
            n: (d.numpy, s) for n, (d, s) in SPECS.items()
        }
        assert all(isinstance(a, np.ndarray) for a in feeds.values())
        np.testing.assert_array_equal(feeds["index"], draws["normal"]["index"])
        np.testing.assert_array_equal(feeds["flag"], draws["normal"]["flag"])
    offset = draws["offset"]["x32"]
    assert 99 < offset.mean() < 101 and 0.05 < offset.std() < 0.2
    np.testing.assert_array_equal(draws["offset"]["x16"], draws["normal"]["x16"])  # 16-bit: no offset
    assert draws["large"]["x32"].std() > 1e5  # beyond fp16's range
    assert 8 < draws["large"]["x16"].astype(np.float32).std() < 32
    for name in ("x32", "x16", "xbf"):
        constant = draws["constant rows"][name].astype(np.float64)
        np.testing.assert_array_equal(constant, np.broadcast_to(constant[:, :1], constant.shape))
        np.testing.assert_array_equal(constant * 4, np.round(constant * 4))


def test_only_the_normal_draw_without_float_inputs():
    draws = random_draws({"index": (DType.INT64, (4,))})
    assert [d.name for d in draws] == ["normal"]


def scalar_flag_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Neg", ["x"], ["negated"]),
        helper.make_node("Where", ["flag", "x", "negated"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "scalar_flag",
        [
            helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def test_a_scalar_bool_input_gets_a_valid_random_input():
    _, report = graphopt.optimize(scalar_flag_model())
    assert report.verification["ok"], report.verification["summary"]
    assert report.verification["inputs"]["flag"] == {"dtype": "bool", "shape": []}


def layer_norm_models(width: int = 64) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """LayerNormalization, and the same norm with its variance taken as E[x^2] - E[x]^2 (a
    rewrite that cancels on rows far from zero)."""
    value = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, width])]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, width])]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [-1])
    eps = helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-5])
    ones = helper.make_tensor("ones", TensorProto.FLOAT, [width], [1.0] * width)
    opsets = [helper.make_opsetid("", 18)]
    norm = helper.make_node("LayerNormalization", ["x", "ones"], ["y"])
    original = helper.make_graph([norm], "layer_norm", value, out, [ones])
    cancelling = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["x", "axes"], ["mean"]),
            helper.make_node("Mul", ["x", "x"], ["square"]),
            helper.make_node("ReduceMean", ["square", "axes"], ["mean_square"]),
            helper.make_node("Mul", ["mean", "mean"], ["mean_squared"]),
            helper.make_node("Sub", ["mean_square", "mean_squared"], ["variance"]),
            helper.make_node("Add", ["variance", "eps"], ["shifted"]),
            helper.make_node("Sqrt", ["shifted"], ["std"]),
            helper.make_node("Sub", ["x", "mean"], ["centered"]),
            helper.make_node("Div", ["centered", "std"], ["y"]),
        ],
        "one_pass",
        value,
        out,
        [axes, eps],
    )
    return (
        helper.make_model(original, opset_imports=opsets, ir_version=9),
        helper.make_model(cancelling, opset_imports=opsets, ir_version=9),
    )


def test_a_cancelling_variance_passes_normal_inputs_but_not_the_offset_draw(tmp_path):
    original, cancelling = layer_norm_models()
    onnx.save(original, tmp_path / "a.onnx")
    onnx.save(cancelling, tmp_path / "b.onnx")

    verdict = verify_models(tmp_path / "a.onnx", tmp_path / "b.onnx")

    assert not verdict["ok"] and verdict["summary"].startswith("on the offset inputs")
    assert {d["name"]: d["ok"] for d in verdict["draws"]}["normal"]


def test_nan_and_infinity_of_the_original_must_be_matched():
    want = [np.array([[np.nan, 1.0], [2.0, np.inf]], np.float32)]
    assert compare(want, [want[0].copy()], ["y"])["ok"]
    finite = np.array([[0.0, 1.0], [2.0, np.inf]], np.float32)
    wrong_inf = np.array([[np.nan, 1.0], [2.0, -np.inf]], np.float32)
    extra_nan = np.array([[np.nan, np.nan], [2.0, np.inf]], np.float32)
    assert not compare(want, [finite], ["y"])["ok"]  # (stress draws: see test_overflow_nan.py)
    for flags in ({}, {"stress": True}, {"stress": True, "ill_conditioned": True}):
        assert not compare(want, [wrong_inf], ["y"], **flags)["ok"]
    assert not compare(want, [extra_nan], ["y"], stress=True)["ok"]
    # A row that is constant in one computation and nearly so in the other: 0/0 may be NaN.
    assert compare(want, [extra_nan], ["y"], stress=True, ill_conditioned=True)["ok"]


def test_stress_draws_judge_errors_against_the_row_magnitude():
    want = [np.array([[1.0e4, 0.1], [1.0, 0.1]], np.float32)]
    got = [np.array([[1.0e4, 0.3], [1.0, 0.1]], np.float32)]  # a cancellation's rounding at 1e4
    tolerances = {DType.FLOAT32: Tolerance(1e-4, 1e-5)}
    assert not compare(want, got, ["y"], tolerances)["ok"]
    assert compare(want, got, ["y"], tolerances, stress=True)["ok"]
    got[0][1, 1] = 0.3  # the same error in a row of ones is an error
    assert not compare(want, got, ["y"], tolerances, stress=True)["ok"]


class AddConstant(torch.nn.Module):
    def __init__(self, constant: float):
        super().__init__()
        self.constant = constant

    def forward(self, x):
        return x + self.constant


def _verdict(original, candidate):
    source = model_files.load(original)
    return Reference.of(source, prepare_draws(source.graph)).check(candidate)


def test_bfloat16_programs_are_compared_with_the_bfloat16_tolerance():
    x = torch.randn(4, 8).to(torch.bfloat16)
    original = torch.export.export(AddConstant(1.0), (x,))
    one_ulp_apart = torch.export.export(AddConstant(1.0 + 2.0**-7), (x,))

    verdict = _verdict(original, one_ulp_apart)

    assert verdict["ok"], verdict["summary"]
    assert verdict["outputs"][0]["dtype"] == str(np.dtype(ml_dtypes.bfloat16))
    assert not _verdict(original, torch.export.export(AddConstant(1.1), (x,)))["ok"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_correct_fusion_passes_every_draw(dtype):
    class Norm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(32)

        def forward(self, x, r):
            return torch.tanh(self.norm(x + r))

    module = Norm().to(dtype)
    example = (torch.randn(4, 32, dtype=dtype), torch.randn(4, 32, dtype=dtype))
    _, report = graphopt.optimize(torch.export.export(module, example))
    assert report.verification["ok"], report.verification["summary"]
    offset = ["offset"] if dtype == torch.float32 else []  # 16-bit inputs get no offset draw
    assert [d["name"] for d in report.verification["draws"]] == ["normal", *offset, "large", "constant rows"]


class CountCalls(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        self.count.add_(1.0)
        return x + self.count


def test_each_draw_starts_from_the_programs_buffers_and_leaves_them_as_they_were():
    program = torch.export.export(CountCalls(), (torch.zeros(2),))

    _, outputs = run_program_many(program, [{"x": np.zeros(2, np.float32)}] * 3)

    for (y,) in outputs:
        np.testing.assert_array_equal(y, np.ones(2, np.float32))
    assert float(program.state_dict["count"][0]) == 0.0
