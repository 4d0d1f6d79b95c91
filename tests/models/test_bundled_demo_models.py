from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from models import export, split_stack

MODELS_DIR = Path(export.__file__).resolve().parent


def _run_onnx(path: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def _seed_input() -> torch.Tensor:
    return split_stack.example_input()


@pytest.mark.parametrize("name", ["split_stack.onnx", "mlp.onnx"])
def test_bundled_onnx_is_valid_and_free_of_stack_traces(name):
    model = onnx.load(MODELS_DIR / name)
    onnx.checker.check_model(model, full_check=True)
    keys = {p.key for n in model.graph.node for p in n.metadata_props}
    assert export.ONNX_STACK_TRACE_KEY not in keys


def test_bundled_split_stack_onnx_matches_the_module():
    model = onnx.load(MODELS_DIR / "split_stack.onnx")
    assert [n for n in model.graph.node if n.op_type == "LayerNormalization"]
    assert all(a.f == 0.0 for n in model.graph.node for a in n.attribute if a.name == "epsilon")
    x = _seed_input()
    with torch.no_grad():
        want = split_stack.SplitStack()(x).numpy()
    np.testing.assert_allclose(
        _run_onnx(MODELS_DIR / "split_stack.onnx", x.numpy()), want, rtol=1e-4, atol=1e-5
    )


def test_bundled_split_stack_pt2_matches_the_module():
    program = torch.export.load(MODELS_DIR / "split_stack.pt2")
    assert program.example_inputs is None
    assert all("stack_trace" not in n.meta for n in program.graph.nodes)
    x = _seed_input()
    with torch.no_grad():
        torch.testing.assert_close(program.module()(x), split_stack.SplitStack()(x), rtol=1e-5, atol=1e-6)


def test_bundled_mlp_has_a_dynamic_batch():
    for batch in (1, 5):
        (x,) = export.mlp_example_inputs(batch)
        with torch.no_grad():
            want = export.mlp.make_mlp(**export.MLP_CONFIG)(x).numpy()
        np.testing.assert_allclose(_run_onnx(MODELS_DIR / "mlp.onnx", x.numpy()), want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_bundled_files_match_a_fresh_export(tmp_path):
    written = {p.name: p for p in export.export_all(tmp_path)}
    assert set(written) == set(export.BUNDLED)
    x = _seed_input()
    np.testing.assert_allclose(
        _run_onnx(written["split_stack.onnx"], x.numpy()),
        _run_onnx(MODELS_DIR / "split_stack.onnx", x.numpy()),
        rtol=1e-6,
        atol=1e-7,
    )
    fresh, bundled = (
        torch.export.load(written["split_stack.pt2"]),
        torch.export.load(MODELS_DIR / "split_stack.pt2"),
    )
    torch.testing.assert_close(fresh.module()(x), bundled.module()(x), rtol=0, atol=0)
    (m,) = export.mlp_example_inputs(3)
    np.testing.assert_allclose(
        _run_onnx(written["mlp.onnx"], m.numpy()),
        _run_onnx(MODELS_DIR / "mlp.onnx", m.numpy()),
        rtol=1e-6,
        atol=1e-7,
    )
