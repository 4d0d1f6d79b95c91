"""The CPU NormActLinear kernel's blocks (graphopt/ort/src/cpu_norm_linear.h): rows normalized a batch
at a time, then multiplied in register blocks of rows x outputs, by the rows kernel (a dot product
per output, summed across lanes by a shuffle tree, outputs in groups past four) or the columns
kernel (outputs across the lanes), in vectors of 4, 8 or 16 floats. Every output of every row is
checked against the spec's float64 reference where the blocks are ragged: rows not a multiple of a
block, K not a multiple of the vector width or of an output group, D not a multiple of the vector
width, per-feature matrices, biases and scales whose rows end inside a block, a broadcast residual.
A row's outputs must also not depend on the rows computed with it (blocks are padded with other
rows' values) nor on the thread count.

The kernels' width is picked once per process (the widest the CPU runs, capped by
GRAPHOPT_CPU_VECTOR_WIDTH), so each width runs this file as a script in a subprocess.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from ort_models import run_at_vector_width

PORTS = ("X", "Scale", "Bias", "Weight", "LinearBias", "Residual")
ATTRIBUTES = {"norm": "layer", "activation": "gelu", "out_activation": "tanh"}
WIDE_ROWS = (1, 3, 17, 33, 70)
WIDE_DIMS = (8, 21, 32, 40, 64, 100, 256, 300)


def cases():
    """name: shapes of X, Scale, Bias, Weight, LinearBias, Residual (None: absent)."""
    out = {}
    for k in range(1, 18):  # every K the fusion admits (up to 16) and one past
        rows, d = WIDE_ROWS[k % len(WIDE_ROWS)], WIDE_DIMS[k % len(WIDE_DIMS)]
        out[f"k{k}_d{d}_rows{rows}"] = ((rows, d), (d,), (d,), (k, d), (k,), None)
        d2 = WIDE_DIMS[(k + 3) % len(WIDE_DIMS)]
        out[f"k{k}_d{d2}_rows37_rms"] = ((37, d2), (d2,), None, (k, d2), None, None)
    out.update({
        # per-feature matrices of 7 rows (blocks end at each), a residual read by position
        "per_feature_k6": ((5, 7, 40), (5, 1, 40), (5, 1, 40), (5, 6, 40), (5, 1, 6), (7, 40)),
        "per_feature_k13": ((3, 11, 24), None, None, (3, 13, 24), (3, 1, 13), None),
        # one row per matrix: every block a single row
        "one_row_per_matrix_k5": ((6, 1, 40), (40,), (40,), (6, 5, 40), (6, 1, 5), None),
        # scales per feature, one matrix for all rows
        "per_feature_scale_k16": ((4, 9, 32), (4, 1, 32), (4, 1, 32), (16, 32), (16,), (4, 9, 32)),
    })  # fmt: skip
    return out


def check_all():
    """Runs every case in this process; raises AssertionError naming the first that fails."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ort_models import assert_close, fused_model, random_inputs, run_model, storage_round

    from graphopt.fused import NORM_ACT_LINEAR

    def run(inputs, threads=1):
        outputs = ("Y", "ResidualSum") if inputs.get("Residual") is not None else ("Y",)
        return run_model(fused_model("NormActLinear", inputs, attrs, "float32", outputs), inputs, threads)[0]

    for index, (name, shapes) in enumerate(cases().items()):
        attrs = dict(ATTRIBUTES, norm="rms") if name.endswith("_rms") else ATTRIBUTES
        inputs = random_inputs(np.random.default_rng(index), dict(zip(PORTS, shapes, strict=True)), "float32")
        while inputs[next(reversed(inputs))] is None:
            inputs.popitem()
        y = run(inputs)
        x, residual = inputs["X"], inputs.get("Residual")
        s = x if residual is None else storage_round(x + residual, "float32")
        want = NORM_ACT_LINEAR.reference(
            s, inputs.get("Scale"), inputs.get("Bias"), inputs["Weight"], inputs.get("LinearBias"),
            norm=attrs["norm"], activation=attrs["activation"], epsilon=1e-5,
            out_activation=attrs["out_activation"],
        )  # fmt: skip
        try:
            assert_close(y, want, "float32")
            np.testing.assert_array_equal(run(inputs, threads=2), y)
            if x.ndim == 2 and x.shape[0] > 1:  # each row alone, and the last rows without the first
                for r in (0, x.shape[0] - 1):
                    np.testing.assert_array_equal(run(dict(inputs, X=x[r : r + 1]))[0], y[r])
                np.testing.assert_array_equal(run(dict(inputs, X=x[1:])), y[1:])
        except AssertionError as error:
            raise AssertionError(f"case {name}: {error}") from None
    return len(cases())


@pytest.mark.parametrize("width", [4, 8, 16])
def test_every_row_and_output_at_each_vector_width(library, width):
    printed = run_at_vector_width(__file__, library, width)
    assert printed.strip().endswith(f"{len(cases())} cases"), printed


if __name__ == "__main__":
    print(f"{check_all()} cases")
