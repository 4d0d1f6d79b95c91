import time
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from bench.synthetic import make_synthetic


@pytest.mark.parametrize("n_nodes", [1, 63, 64, 65, 500, 5000])
def test_exact_node_count_and_valid(n_nodes):
    model = make_synthetic(n_nodes, seed=0)
    assert len(model.graph.node) == n_nodes
    onnx.checker.check_model(model, full_check=True)


def test_deterministic_per_seed():
    assert make_synthetic(800, seed=4).SerializeToString() == make_synthetic(800, seed=4).SerializeToString()
    assert make_synthetic(800, seed=4).SerializeToString() != make_synthetic(800, seed=5).SerializeToString()


def test_looks_like_an_exported_graph():
    ops = Counter(n.op_type for n in make_synthetic(5000, seed=0).graph.node)
    for op in (
        "LayerNormalization",
        "MatMul",
        "Split",
        "Concat",
        "Unsqueeze",
        "Reshape",
        "Tanh",
        "ReduceMean",
    ):
        assert ops[op] > 0, op
    assert ops["Split"] >= 50


@pytest.mark.parametrize("batch", [2, "batch"])
def test_runs_in_onnxruntime_with_finite_outputs(batch):
    model = make_synthetic(600, seed=1, batch=batch)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    (y,) = session.run(None, {"x": x})
    assert y.shape == (2, 16)
    assert np.isfinite(y).all()


def test_rejects_bad_sizes():
    with pytest.raises(ValueError):
        make_synthetic(0)
    with pytest.raises(ValueError):
        make_synthetic(100, width=12)


@pytest.mark.slow
def test_fifty_thousand_nodes_in_under_five_seconds():
    start = time.perf_counter()
    model = make_synthetic(50_000, seed=0)
    assert time.perf_counter() - start < 5.0
    assert len(model.graph.node) == 50_000
    onnx.checker.check_model(model)
