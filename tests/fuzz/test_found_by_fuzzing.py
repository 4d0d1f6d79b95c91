"""Regression tests for what the fuzzing of the loaders and the command line found: each damaged
file once ended in a traceback, an internal error, a wrong exit code or more than one line."""

import json
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from damaged_models import const, info, matmul_relu, model, run, spelled_layer_norm
from onnx import TensorProto, helper

import graphopt
from graphopt.files import model_files as io

REPO = Path(__file__).resolve().parents[2]


def _save(tmp_path, built, name="case.onnx"):
    path = tmp_path / name
    path.write_bytes(built.SerializeToString())
    return path


def _one_error_line(tmp_path, path, *fragments, command="optimize"):
    code, stderr, problem = run(tmp_path, command, path)
    assert problem is None, problem
    assert code == 2, stderr
    for fragment in fragments:
        assert fragment in stderr, stderr


def test_raw_data_of_the_wrong_size_is_bad_input(tmp_path):
    """A lengthened weight passed the checker (it checks only for too little data) and failed in a
    pass with 'buffer size must be a multiple of element size'."""
    built = matmul_relu()
    built.graph.initializer[0].raw_data += b"\0\0"
    _one_error_line(tmp_path, _save(tmp_path, built), "tensor 'w' holds 258 bytes; its shape [8, 8]")


def test_a_retyped_tensor_is_bad_input(tmp_path):
    """An int64 shape tensor relabelled float16 has four times the values its dims say."""
    built = matmul_relu()
    built.graph.initializer[0].data_type = TensorProto.FLOAT16
    _one_error_line(tmp_path, _save(tmp_path, built), "holds 256 bytes; its shape [8, 8] and type need 128")


def test_an_external_location_that_is_not_text_is_bad_input(tmp_path):
    """Protobuf gives bytes for a string field that is not UTF-8; the path join raised TypeError."""
    built = matmul_relu()
    tensor = built.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "WXYZ"
    data = built.SerializeToString().replace(b"WXYZ", b"\xff\xfe\xff\xfe")
    path = tmp_path / "case.onnx"
    path.write_bytes(data)
    _one_error_line(tmp_path, path, "external data fields that are not text")


@pytest.mark.parametrize("field", ["node name", "value name"])
def test_a_name_that_is_not_text_is_bad_input(tmp_path, field):
    """Fuzz case 11944: a node name whose bytes are not UTF-8 came back from protobuf as bytes, and
    writing the optimized model raised UnicodeDecodeError (an internal error, exit 3)."""
    built = matmul_relu()
    if field == "node name":
        built.graph.node[0].name = "WXYZ"
    else:
        built.graph.node[0].output[0] = built.graph.node[1].input[0] = "WXYZ"
    path = tmp_path / "case.onnx"
    path.write_bytes(built.SerializeToString().replace(b"WXYZ", b"\xe8\xa91-"))
    _one_error_line(tmp_path, path, "is not UTF-8 text; expected text names")
    assert not (tmp_path / "out.onnx").exists()


def test_a_checker_report_that_is_not_text_is_bad_input(tmp_path):
    """The checker's message quoted a damaged name and raised UnicodeDecodeError instead (the names are
    now checked for text before the checker runs)."""
    built = matmul_relu()
    built.graph.node[1].op_type = "QQQQ"
    path = tmp_path / "case.onnx"
    path.write_bytes(built.SerializeToString().replace(b"QQQQ", b"\xff\xfe\xff\xfe"))
    _one_error_line(tmp_path, path, "a name of node 1, b'\\xff\\xfe\\xff\\xfe', is not UTF-8 text")


@pytest.mark.parametrize(
    "damage",
    [
        lambda node: node.ClearField("attribute"),  # Concat without its axis: KeyError
        lambda node: node.attribute[0].CopyFrom(helper.make_attribute("axis", [1, 2])),  # ints: TypeError
    ],
    ids=["missing_axis", "mistyped_axis"],
)
def test_a_node_missing_or_mistyping_a_required_attribute_is_bad_input(tmp_path, damage):
    built = model(
        [helper.make_node("Concat", ["a", "b"], ["y"], axis=1)],
        [info("a", [2, 3]), info("b", [2, 3])],
        [info("y", [2, 6])],
    )
    damage(built.graph.node[0])
    _one_error_line(tmp_path, _save(tmp_path, built), "is not a valid ONNX graph")


def test_a_constant_with_a_value_of_the_wrong_kind_is_bad_input(tmp_path):
    built = model(
        [
            helper.make_node(
                "Constant", [], ["c"], value=onnx.numpy_helper.from_array(np.ones(3, np.float32))
            ),
            helper.make_node("Add", ["x", "c"], ["y"]),
        ],
        [info("x", [3])],
        [info("y", [3])],
    )
    built.graph.node[0].attribute[0].CopyFrom(helper.make_attribute("value", [1.0, 2.0, 3.0]))
    _one_error_line(tmp_path, _save(tmp_path, built), "is not a valid ONNX graph")


def test_a_runtime_failure_is_one_line_without_onnxruntime_log_lines(tmp_path):
    """A LayerNormalization whose scale does not fit fails inside ONNX Runtime's run, which logged
    its own error line on stderr before graphopt's."""
    built = model(
        [helper.make_node("LayerNormalization", ["x", "scale"], ["y"], axis=-1)],
        [info("x", [4, 8])],
        [info("y", [4, 8])],
        [const("scale", np.ones(3, np.float32))],
        opset=17,
    )
    _one_error_line(tmp_path, _save(tmp_path, built), "ONNX Runtime cannot run the model")


def test_a_failed_shape_inference_is_a_report_note_not_a_second_stderr_line(tmp_path, monkeypatch):
    """Shape inference failing on a model that is then refused printed a warning before the error;
    for a model that optimizes it is now a note in the report."""
    built = onnx.load(str(REPO / "models" / "mlp.onnx"))
    weight = next(t for t in built.graph.initializer if len(t.dims) == 2)
    weight.dims.append(1)  # (the same bytes: the checker accepts it; inference and the runtime do not)
    with pytest.raises(onnx.shape_inference.InferenceError):
        onnx.shape_inference.infer_shapes(built, strict_mode=False, data_prop=True)
    _one_error_line(tmp_path, _save(tmp_path, built), "ONNX Runtime cannot run the model")

    def fails(*args, **kwargs):
        raise onnx.shape_inference.InferenceError("[ShapeInferenceError] for this test")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fails)
    _, report = graphopt.optimize(matmul_relu())
    assert report.notes == [
        "ONNX shape inference failed ([ShapeInferenceError] for this test); used the types the model declares"
    ]


def test_a_nan_epsilon_is_not_fused(tmp_path):
    """A spelled-out norm with a NaN epsilon became a NormAct that the runtime refuses to run
    ('attribute epsilon is -nan'): the optimized model failed the numeric check."""
    path = _save(tmp_path, spelled_layer_norm(float("nan")))
    code, stderr, problem = run(tmp_path, "optimize", path)
    assert (code, problem) == (0, None), stderr
    _, report = graphopt.optimize(spelled_layer_norm(float("nan")))
    reasons = [m.reason for p in report.passes for m in p.near_misses]
    assert any("not a finite non-negative number" in r for r in reasons)


def test_keepdims_other_than_0_or_1_is_left_as_it_is():
    """ONNX Runtime keeps dims only for keepdims=1; graphopt read 7 as true and changed the shape."""
    built = model(
        [
            helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=7),
            helper.make_node("Relu", ["m"], ["y"]),
        ],
        [info("x", [3, 4])],
        [info("y", None)],
        opset=17,
    )
    built.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 4
    _, report = graphopt.optimize(built)
    assert report.verification["ok"]
    assert report.verification["outputs"][0]["shape"] == [4]


def test_an_axis_out_of_range_is_a_near_miss_not_a_crash(tmp_path):
    """Split with axis 2147483647 reached a rule's check, which raised GraphError (an internal error
    with --no-verify; with the check on, the runtime refuses the model first)."""
    built = model(
        [
            helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=2**31 - 1),
            helper.make_node("Concat", ["a", "b"], ["y"], axis=0),
        ],
        [info("x", [4])],
        [info("y", [4])],
        [const("sizes", np.array([2, 2], np.int64))],
    )
    path = _save(tmp_path, built)
    code, stderr, problem = run(tmp_path, "optimize", path, "--no-verify")
    assert (code, problem) == (0, None), stderr
    _one_error_line(tmp_path, path, "ONNX Runtime cannot run the model")


def test_an_omitted_required_input_is_carried_not_translated(tmp_path):
    """Concat with an input named "" (omitted) reached the batching passes as None and crashed them."""
    built = model(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ["r", ""], ["y"], axis=0)],
        [info("x", [4])],
        [info("y", [4])],
    )
    path = _save(tmp_path, built)
    code, stderr, problem = run(tmp_path, "optimize", path, "--no-verify")
    assert problem is None and code in (0, 2), stderr


def test_a_damaged_compression_method_in_a_pt2_is_bad_input(tmp_path):
    """zipfile raises NotImplementedError for an unknown compression method; it was an internal error."""
    data = bytearray((REPO / "models" / "split_stack.pt2").read_bytes())
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        where = data.find(signature)
        data[where + offset : where + offset + 2] = (99).to_bytes(2, "little")
    path = tmp_path / "case.pt2"
    path.write_bytes(bytes(data))
    with pytest.raises(NotImplementedError), zipfile.ZipFile(path) as archive:
        archive.read(archive.namelist()[0])
    _one_error_line(tmp_path, path, "damaged zip archive")


def test_a_concat_of_different_ranks_is_bad_input(tmp_path):
    """The frontend's shape rules indexed past the end of a scalar's shape (IndexError, an internal
    error) while reading a Concat of a scalar and a matrix."""
    built = model(
        [helper.make_node("Concat", ["x", "c"], ["y"], axis=1)],
        [info("x", [2, 3])],
        [info("y", [2, 4])],
        [const("c", np.float32(1.0))],
    )
    _one_error_line(tmp_path, _save(tmp_path, built))


def test_a_norm_recognized_below_opset_17_is_written_out(tmp_path):
    """A spelled-out layer norm in an opset 13 model was recognized, and then could not be written:
    LayerNormalization is opset 17 ('needs opset 17', an internal error)."""
    built = spelled_layer_norm(1e-5)
    built.opset_import[0].version = 13
    built.graph.node[-1].op_type = "Identity"  # (no activation after it: the norm stays a norm)
    built.graph.initializer.append(const("scale", np.linspace(0.5, 1.5, 8, dtype=np.float32)))
    built.graph.node.insert(7, helper.make_node("Mul", ["n", "scale"], ["n2"]))
    built.graph.node[-1].input[0] = "n2"
    optimized, report = graphopt.optimize(built)
    assert report.rule_counts["layer_norm_from_ops[mul,div]"] == 1
    assert "LayerNormalization" not in [n.op_type for n in optimized.graph.node]
    code, stderr, problem = run(tmp_path, "optimize", _save(tmp_path, built))
    assert (code, problem) == (0, None), stderr


def test_declared_shapes_that_contradict_the_ops_are_not_trusted():
    """A Concat's axis changed while the declared output shape stayed: shape inference keeps a
    declared shape it disagrees with, the declared [2, 4, 8] was believed, and batch_split_chains
    restored that layout instead of the [2, 16, 2] the runtime computes (the numeric check caught
    it and refused to write)."""
    nodes = [helper.make_node("Split", ["x", "sizes"], [f"p{i}" for i in range(4)], axis=2)]
    nodes += [helper.make_node("Tanh", [f"p{i}"], [f"t{i}"]) for i in range(4)]
    nodes.append(helper.make_node("Concat", [f"t{i}" for i in range(4)], ["y"], axis=1))
    built = model(
        nodes, [info("x", [2, 4, 8])], [info("y", [2, 4, 8])], [const("sizes", np.full(4, 2, np.int64))]
    )
    inferred = onnx.shape_inference.infer_shapes(built, strict_mode=False, data_prop=True)
    assert [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim] == [2, 4, 8]
    _, report = graphopt.optimize(built)
    assert report.verification["ok"]
    assert report.verification["outputs"][0]["shape"] == [2, 16, 2]
    assert report.rule_counts.get("batch_split_chains") == 1


def test_a_declared_width_beside_a_symbolic_batch_is_not_trusted(tmp_path):
    """A graph output's width was damaged to 10^9 beside a symbolic batch: the declared shape was
    believed (only fully static ones were checked against the op), and the norm computed from that
    output was written with a 10^9-element scale of ones (EncodeError, exit 3; once a segfault).
    What is computed from such a value inherited the declared width through shape inference."""
    built = spelled_layer_norm(1e-5)
    built.graph.node.insert(0, helper.make_node("Mul", ["x", "x"], ["p"]))
    for node in built.graph.node[1:3]:
        node.input[0] = "p"
    built.graph.input[0].CopyFrom(info("x", ["batch", 8]))
    built.graph.output[0].CopyFrom(info("y", ["batch", 8]))
    built.graph.output.append(info("p", ["batch", 10**9]))
    values = {v.name: v for v in io.load(built).graph.values()}
    assert [values[name].shape for name in ("p", "d", "n")] == [("batch", 8)] * 3
    code, stderr, problem = run(tmp_path, "optimize", _save(tmp_path, built))
    assert (code, problem) == (0, None), stderr


def test_a_dim_of_a_billion_is_refused_before_the_check_draws_inputs(tmp_path, monkeypatch):
    """A graph input's dim damaged to 10^9 (fp16: 2 GB a draw, under the 2 GiB limit of one draw):
    the check drew its inputs for 80 s (146 s on a loaded machine) before running out of memory,
    past the fuzzing's time limit, though the runtime then refuses the model anyway."""
    from graphopt.verification import draws

    def allocates(*args, **kwargs):
        raise AssertionError("inputs drawn")

    monkeypatch.setattr(draws, "random_inputs", allocates)
    built = model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [info("x", [1, 10**9], TensorProto.FLOAT16)],
        [info("y", [1, 10**9], TensorProto.FLOAT16)],
    )
    _one_error_line(tmp_path, _save(tmp_path, built), "random inputs would take 13.0 GiB", "--input-shape")


def test_a_pt2_whose_linear_weight_is_damaged_to_1e35_is_checked_exactly(
    tmp_path, tmp_path_factory, monkeypatch
):
    """Loader fuzz case 6584: ten bytes of split_stack.pt2's linear weight overwritten (one value
    -1.1e35). The fused ops' CPU implementations rounded their statistics otherwise than the native
    norm the original runs, the check disagreed, and its float64 second opinion evaluated the
    original ten times on the 4M-element input, past the fuzzing's 120 s. On the CPU the fused ops
    now call the native ops: every draw agrees exactly, and nothing is evaluated in float64."""
    from graphopt.verification import float64_check

    with zipfile.ZipFile(REPO / "models" / "split_stack.pt2") as archive:
        members = [(info.filename, archive.read(info.filename)) for info in archive.infolist()]
    path = tmp_path / "case.pt2"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, body in members:
            if name.endswith("data/weights/weight_0"):
                body = body[:919] + bytes.fromhex("0b8aafb0f98417d026fb") + body[929:]
                assert np.frombuffer(body, np.float32).min() < -1e35
            archive.writestr(name, body)

    def evaluates(*args, **kwargs):
        raise AssertionError("the float64 second opinion was asked")

    monkeypatch.setattr(float64_check, "float64_reference", evaluates)
    report = tmp_path_factory.mktemp("report") / "report.json"
    code, stderr, problem = run(tmp_path, "optimize", path, "--report-json", report)
    assert (code, problem) == (0, None), stderr
    draws = json.loads(report.read_text())["verification"]["draws"]
    assert [d["summary"] for d in draws] == ["1 output(s), max abs error 0"] * 4
