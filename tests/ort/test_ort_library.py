import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import graphopt.ort
from graphopt.ort import LIBRARY_ENV, OrtLibraryNotFoundError, create_session, library_path


def identity_model():
    graph = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["Y"])],
        "identity",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_import_is_cheap_and_needs_no_library():
    code = (
        "import os, sys, graphopt; os.environ['GRAPHOPT_ORT_LIBRARY'] = '/nonexistent/lib.so'; "
        "before = set(sys.modules); import graphopt.ort; "
        "added = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "heavy = added & {'onnx', 'onnxruntime', 'numpy', 'torch'}; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_library_path_names_a_shared_library(library):
    path = Path(library)
    assert path.is_file() and path.name == graphopt.ort.LIBRARY_NAME


def test_environment_override(monkeypatch, library, tmp_path):
    monkeypatch.setenv(LIBRARY_ENV, library)
    assert library_path() == str(Path(library).resolve())
    monkeypatch.setenv(LIBRARY_ENV, str(tmp_path / "missing.so"))
    with pytest.raises(OrtLibraryNotFoundError, match=LIBRARY_ENV):
        library_path()


def test_missing_library_says_how_to_build(monkeypatch):
    monkeypatch.delenv(LIBRARY_ENV, raising=False)
    monkeypatch.setattr(graphopt.ort, "_candidates", lambda: [])
    with pytest.raises(OrtLibraryNotFoundError, match=r"pip install --no-build-isolation -e \."):
        library_path()


def test_library_registers_without_a_gpu(library):
    """Registration includes the CUDA kernels when they were built: loading must not need a GPU."""
    options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(library)
    session = onnxruntime.InferenceSession(
        identity_model().SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    x = np.array([1.0, 2.0], np.float32)
    np.testing.assert_array_equal(session.run(None, {"X": x})[0], x)


def test_registering_in_many_sessions(library):
    for _ in range(3):
        create_session(identity_model(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("form", ["proto", "bytes", "path"])
def test_create_session_accepts_model_forms(library, tmp_path, form):
    model = identity_model()
    if form == "bytes":
        model = model.SerializeToString()
    elif form == "path":
        (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
        model = tmp_path / "m.onnx"
    session = create_session(model, providers=["CPUExecutionProvider"], intra_op_num_threads=1)
    assert [o.name for o in session.get_outputs()] == ["Y"]


def test_create_session_rejects_unknown_option(library):
    with pytest.raises(TypeError, match=r"unknown session option 'intra_threads'.*intra_op_num_threads"):
        create_session(identity_model(), intra_threads=1)


def test_create_session_without_library_cannot_run_fused_nodes():
    graph = helper.make_graph(
        [helper.make_node("NormAct", ["X"], ["Y"], domain="graphopt")],
        "fused",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("graphopt", 1)], ir_version=10
    )
    with pytest.raises(Exception, match="NormAct"):
        create_session(model, use_library=False, providers=["CPUExecutionProvider"])
