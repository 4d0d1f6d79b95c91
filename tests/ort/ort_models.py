"""Single-node models of the graphopt fused ops, run with the custom-op library (tests/ort).

The models carry no model-local functions, so only the library's kernels can run them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

from graphopt.fused import DOMAIN, DOMAIN_VERSION, by_name
from graphopt.ort import create_session

ELEM_TYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
# Relative tolerance against the float64 reference; absolute tolerance is the same fraction of
# the reference's largest magnitude (at least 1), so values near zero are not judged relatively.
TOLERANCES = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 2e-2}


def storage_round(values: np.ndarray, dtype: str) -> np.ndarray:
    """Rounds float values to the storage type; returns float32 (bfloat16) or the storage array."""
    if dtype == "bfloat16":
        return values.astype(ml_dtypes.bfloat16).astype(np.float32)
    return values.astype(dtype)


def random_inputs(rng: np.random.Generator, shapes: dict[str, Sequence[int] | None], dtype: str):
    return {
        name: None if shape is None else storage_round(rng.standard_normal(shape).astype(np.float32), dtype)
        for name, shape in shapes.items()
    }


def offset_rows(rng: np.random.Generator, rows: int, cols: int) -> dict[str, np.ndarray]:
    """float32 rows 1000 + 0.1 * noise with scales up to 200: statistics taken naively lose the
    noise's low bits to the offset, and the scale magnifies the error."""
    return {
        "X": (1000.0 + 0.1 * rng.standard_normal((rows, cols))).astype(np.float32),
        "Scale": rng.uniform(0.0, 200.0, cols).astype(np.float32),
        "Bias": rng.standard_normal(cols).astype(np.float32),
    }


def fused_model(
    op_name: str,
    inputs: dict[str, np.ndarray | None],
    attributes: dict,
    dtype: str,
    outputs: Sequence[str] = ("Y",),
) -> onnx.ModelProto:
    """One graphopt node. `inputs` maps the op's port names, in order, to arrays (None: absent).

    bfloat16 models take and return float32 and Cast at the edges: numpy has no bfloat16 that
    onnxruntime's Python binding accepts, while ORT's CPU Cast handles it.
    """
    op = by_name(op_name)
    ports = [p.name for p in op.inputs]
    assert list(inputs) == ports[: len(inputs)], f"inputs must follow the op's port order {ports}"
    elem = ELEM_TYPES[dtype]
    io_elem = TensorProto.FLOAT if dtype == "bfloat16" else elem
    nodes, graph_inputs, node_inputs = [], [], []
    for name, value in inputs.items():
        if value is None:
            node_inputs.append("")
            continue
        graph_inputs.append(helper.make_tensor_value_info(name, io_elem, list(value.shape)))
        if dtype == "bfloat16":
            nodes.append(helper.make_node("Cast", [name], [f"{name}_bf16"], to=elem))
            name = f"{name}_bf16"
        node_inputs.append(name)
    node_outputs = [f"{o}_bf16" if dtype == "bfloat16" and o else o for o in outputs]
    nodes.append(
        helper.make_node(
            op_name, node_inputs, node_outputs, domain=DOMAIN, name=f"{op_name.lower()}_0", **attributes
        )
    )
    if dtype == "bfloat16":
        nodes += [helper.make_node("Cast", [f"{o}_bf16"], [o], to=TensorProto.FLOAT) for o in outputs if o]
    graph_outputs = [helper.make_tensor_value_info(o, io_elem, None) for o in outputs if o]
    graph = helper.make_graph(nodes, f"{op_name}_test", graph_inputs, graph_outputs)
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)],
        ir_version=10,
    )


def run_model(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray | None], threads: int = 1
) -> list[np.ndarray]:
    session = create_session(model, providers=["CPUExecutionProvider"], intra_op_num_threads=threads)
    return session.run(None, {k: v for k, v in inputs.items() if v is not None})


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str) -> None:
    tol = TOLERANCES[dtype]
    expected = np.asarray(expected, dtype=np.float64)
    atol = tol * max(1.0, float(np.abs(expected).max(initial=0.0)))
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=tol, atol=atol)


def run_at_vector_width(script: str, library: str, width: int) -> str:
    """Runs the test file ``script`` as a program, the CPU kernels capped at ``width`` floats a vector
    (GRAPHOPT_CPU_VECTOR_WIDTH, read once per process) and ``library`` registered; asserts that it
    exited cleanly and returns what it printed."""
    env = dict(os.environ, GRAPHOPT_CPU_VECTOR_WIDTH=str(width), GRAPHOPT_ORT_LIBRARY=library)
    done = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
