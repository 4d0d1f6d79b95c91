import numpy as np
import pytest

from graphopt.ir import DType
from graphopt.verification.numeric import (
    DEFAULT_TOLERANCES,
    Tolerance,
    compare,
    parse_tolerance,
    resolve_tolerances,
)


def test_parse_one_dtype_or_all():
    assert parse_tolerance("float16=1e-2,1e-3") == {DType.FLOAT16: Tolerance(1e-2, 1e-3)}
    every = parse_tolerance("0.001,0")
    assert set(every) == set(DEFAULT_TOLERANCES)
    assert all(t == Tolerance(1e-3, 0.0) for t in every.values())


@pytest.mark.parametrize(
    "text, message",
    [
        ("1e-3", "expected [DTYPE=]RTOL,ATOL"),
        ("a,b", "expected [DTYPE=]RTOL,ATOL"),
        ("int8=1,1", "'int8' is not a float dtype"),
        ("float32=-1,0", "non-negative"),
        ("float32=nan,0", "non-negative"),
    ],
)
def test_parse_refuses(text, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_tolerance(text)


def test_resolve_accepts_dtypes_names_numpy_dtypes_and_pairs():
    resolved = resolve_tolerances({"float16": (0.1, 0.2), np.float32: Tolerance(0.3, 0.4)})
    assert resolved[DType.FLOAT16] == Tolerance(0.1, 0.2)
    assert resolved[DType.FLOAT32] == Tolerance(0.3, 0.4)
    assert resolved[DType.FLOAT64] == DEFAULT_TOLERANCES[DType.FLOAT64]


def test_compare_uses_the_tolerance_of_the_output_dtype():
    want = [np.ones(4, np.float32)]
    got = [np.ones(4, np.float32) * np.float32(1.001)]
    assert not compare(want, got, ["y"])["ok"]
    assert compare(want, got, ["y"], {DType.FLOAT32: Tolerance(1e-2, 0)})["ok"]
    assert not compare(want, got, ["y"], {DType.FLOAT16: Tolerance(1e-2, 0)})["ok"]


def test_compare_reports_relative_error_and_output_counts():
    verdict = compare([np.array([2.0, 0.0])], [np.array([2.5, 0.0])], ["y"])
    assert verdict["outputs"][0]["max_rel"] == pytest.approx(0.25)
    assert verdict["outputs"][0]["max_abs"] == pytest.approx(0.5)
    assert compare([np.zeros(1)], [], ["y"])["summary"] == "expected 1 output(s), got 0"


def test_integers_compare_exactly_and_nan_positions_must_agree():
    assert not compare([np.array([1, 2])], [np.array([1, 3])], ["i"])["ok"]
    assert compare([np.array([np.nan, 1.0])], [np.array([np.nan, 1.0])], ["f"])["ok"]
    assert not compare([np.array([np.nan, 1.0])], [np.array([0.0, 1.0])], ["f"])["ok"]
