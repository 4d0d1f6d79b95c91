"""The CPU NormAct kernel (graphopt/fused/norm_act/ort_cpu.cc): blocks of rows normalized by the row
kernel NormActLinear shares (cpu_norm_linear.h), float32 rows written straight into Y, 16-bit ones
staged and rounded, in vectors of 4, 8 or 16 floats. Every value is checked against the spec's float64
reference where the vectors and blocks are ragged: widths not a multiple of the vector width, row counts
not a multiple of a batch or a block, rows with a large common offset, per-feature scales, a broadcast
residual and its sum. A row's values must not depend on the rows normalized with it nor on the thread
count.

The kernels' width is picked once per process (the widest the CPU runs, capped by
GRAPHOPT_CPU_VECTOR_WIDTH), so each width runs this file as a script in a subprocess.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from ort_models import run_at_vector_width

PORTS = ("X", "Scale", "Bias", "Residual")
DIMS = (1, 3, 8, 21, 33, 100, 256, 300, 1000, 4100)
ROWS = (1, 5, 17, 40)


def cases():
    """name: (dtype, attributes, shapes of X, Scale, Bias, Residual (None: absent), offset of X)."""
    gelu, silu, tanh_rms = (
        {"activation": "gelu"},
        {"activation": "silu"},
        {"norm": "rms", "activation": "tanh"},
    )
    out = {}
    for i, d in enumerate(DIMS):
        rows = ROWS[i % len(ROWS)]
        plain = ((rows, d), (d,), (d,), None)
        for dtype in ("float32", "float16", "bfloat16"):
            out[f"{dtype}_d{d}_rows{rows}"] = (dtype, gelu, plain, 0.0)
        out[f"offset_d{d}_rows{rows}"] = ("float32", silu, plain, 1e3)
        out[f"rms_residual_d{d}"] = ("float32", tanh_rms, ((7, d), (d,), None, (7, d)), 0.0)
    # Per-feature scale and bias over 9 and 11 rows (groups end inside a block), residuals read by
    # position and in full.
    out["per_feature"] = (
        "float32",
        {"activation": "relu"},
        ((4, 9, 40), (4, 1, 40), (4, 1, 40), (9, 40)),
        0.0,
    )
    out["per_feature_fp16"] = ("float16", gelu, ((3, 11, 24), (3, 1, 24), None, (3, 11, 24)), 0.0)
    return out


def run(given: dict, attrs: dict, dtype: str, threads: int = 1) -> list[np.ndarray]:
    from ort_models import fused_model, run_model

    outputs = ("Y", "ResidualSum") if given.get("Residual") is not None else ("Y",)
    return run_model(fused_model("NormAct", given, attrs, dtype, outputs), given, threads)


def check_all():
    """Runs every case in this process; raises AssertionError naming the first that fails."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ort_models import assert_close, random_inputs, storage_round

    from graphopt.fused import NORM_ACT

    for index, (name, (dtype, attrs, shapes, offset)) in enumerate(cases().items()):
        inputs = random_inputs(np.random.default_rng(index), dict(zip(PORTS, shapes, strict=True)), dtype)
        inputs["X"] = storage_round(inputs["X"].astype(np.float32) * 2 + offset, dtype)
        while inputs[next(reversed(inputs))] is None:
            inputs.popitem()
        residual = inputs.get("Residual")
        got = run(inputs, attrs, dtype)
        x = inputs["X"].astype(np.float64)
        s = x if residual is None else storage_round((x + residual).astype(np.float32), dtype)
        want, _ = NORM_ACT.reference(
            s.astype(np.float64), inputs.get("Scale"), inputs.get("Bias"), norm=attrs.get("norm", "layer"),
            activation=attrs["activation"], epsilon=1e-5, axis=-1,
        )  # fmt: skip
        try:
            assert_close(got[0].astype(np.float64), want, dtype)
            if residual is not None:
                np.testing.assert_array_equal(got[1].astype(np.float64), s.astype(np.float64))
            np.testing.assert_array_equal(run(inputs, attrs, dtype, threads=2)[0], got[0])
            if x.ndim == 2 and x.shape[0] > 1 and residual is None:  # each row alone, and all but the first
                for r in (0, x.shape[0] - 1):
                    alone = run(dict(inputs, X=inputs["X"][r : r + 1]), attrs, dtype)[0]
                    np.testing.assert_array_equal(alone[0], got[0][r])
                np.testing.assert_array_equal(
                    run(dict(inputs, X=inputs["X"][1:]), attrs, dtype)[0], got[0][1:]
                )
        except AssertionError as error:
            raise AssertionError(f"case {name}: {error}") from None
    return len(cases())


@pytest.mark.parametrize("width", [4, 8, 16])
def test_every_row_at_each_vector_width(library, width):
    printed = run_at_vector_width(__file__, library, width)
    assert printed.strip().endswith(f"{len(cases())} cases"), printed


if __name__ == "__main__":
    print(f"{check_all()} cases")
