"""File forms deployment pipelines write, which graphopt must take and give back intact: quantized
(QDQ) models, weights stored narrow and cast up at use, nodes out of topological order (ONNX
Runtime's float16 converter), float16 models with float32 inputs and outputs, and the extra files of
a torch.export archive."""

import collections
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import graphopt

D = 64


def _model(nodes, inputs, outputs, initializers, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _ort_ops(model: onnx.ModelProto, tmp_path) -> collections.Counter:
    path = tmp_path / f"ort_{len(list(tmp_path.iterdir()))}.onnx"
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.optimized_model_filepath = str(path)
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return collections.Counter(n.op_type for n in onnx.load(path).graph.node)


def _qdq_matmul(weight_dq_input: str, extra_nodes=(), extra_inits=()):
    rng = np.random.default_rng(0)
    nodes = [
        *extra_nodes,
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", [weight_dq_input, "ws"], ["wd"]),
        helper.make_node("MatMul", ["xd", "wd"], ["m"]),
        helper.make_node("QuantizeLinear", ["m", "ys", "yz"], ["mq"]),
        helper.make_node("DequantizeLinear", ["mq", "ys", "yz"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(rng.integers(-127, 127, (D, D)).astype(np.int8), "W"),
        numpy_helper.from_array(np.float32(0.01), "ws"),
        numpy_helper.from_array(np.float32(0.02), "xs"),
        numpy_helper.from_array(np.uint8(128), "xz"),
        numpy_helper.from_array(np.float32(0.5), "ys"),
        numpy_helper.from_array(np.uint8(128), "yz"),
        *extra_inits,
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", D])],
        inits,
    )


def test_quantized_weights_stay_quantized(tmp_path):
    """A DequantizeLinear of an int8 weight is half of a QDQ node unit (ONNX Runtime runs the unit as
    QLinearMatMul): folded into a float32 initializer, the weight takes 4x the bytes and the MatMul
    runs in float."""
    model = _qdq_matmul("W")
    optimized, _ = graphopt.optimize(model)
    assert {t.name: t.data_type for t in optimized.graph.initializer}["W"] == TensorProto.INT8
    assert _ort_ops(optimized, tmp_path)["QLinearMatMul"] == _ort_ops(model, tmp_path)["QLinearMatMul"] == 1


def test_fake_quantized_weights_keep_their_quantize_dequantize_pair():
    """TensorRT's explicit quantization: a float weight through QuantizeLinear → DequantizeLinear."""
    rng = np.random.default_rng(1)
    model = _qdq_matmul(
        "Wq",
        extra_nodes=[helper.make_node("QuantizeLinear", ["Wf", "ws"], ["Wq"])],
        extra_inits=[numpy_helper.from_array(rng.standard_normal((D, D)).astype(np.float32), "Wf")],
    )
    optimized, _ = graphopt.optimize(model)
    ops = collections.Counter(n.op_type for n in optimized.graph.node)
    assert ops["QuantizeLinear"] == 3 and ops["DequantizeLinear"] == 3


def test_narrow_weights_cast_up_do_not_grow_the_model():
    """Many float16 weights each cast to float32 where used: each Cast folded alone is under the
    growth limit, all of them together doubled the model."""
    rng = np.random.default_rng(0)
    nodes, inits, current = [], [], "x"
    for i in range(20):
        inits.append(
            numpy_helper.from_array((rng.standard_normal((256, 256)) / 16).astype(np.float16), f"w{i}")
        )
        nodes += [
            helper.make_node("Cast", [f"w{i}"], [f"wf{i}"], to=TensorProto.FLOAT),
            helper.make_node("MatMul", [current, f"wf{i}"], [f"h{i}"]),
            helper.make_node("Relu", [f"h{i}"], [f"a{i}"]),
        ]
        current = f"a{i}"
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 256])],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, ["n", 256])],
        inits,
    )
    optimized, _ = graphopt.optimize(model)
    before = sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    after = sum(numpy_helper.to_array(t).nbytes for t in optimized.graph.initializer)
    assert after <= before + (1 << 20)


def test_nodes_out_of_topological_order_are_read(tmp_path):
    """convert_float_to_float16(keep_io_types=True) appends its input Casts after the nodes reading
    them; ONNX Runtime sorts the graph, and so does graphopt's reader: the checker must not refuse."""
    nodes = [
        helper.make_node("Relu", ["c"], ["y"]),
        helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT16),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, D])],
        [],
    )
    optimized, _ = graphopt.optimize(model)
    assert [n.op_type for n in optimized.graph.node] == ["Cast", "Relu"]


def _float16_inside(tmp_path):
    """Add → LayerNorm → Tanh in float16, inputs and outputs float32 (keep_io_types)."""
    rng = np.random.default_rng(0)

    def value(name, dtype):
        return helper.make_tensor_value_info(name, dtype, ["b", "s", D])

    nodes = [
        helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["r"], ["rh"], to=TensorProto.FLOAT16),
        helper.make_node("Add", ["xh", "rh"], ["a"]),
        helper.make_node("LayerNormalization", ["a", "w", "b"], ["n"], axis=-1, epsilon=1e-5),
        helper.make_node("Tanh", ["n"], ["t"]),
        helper.make_node("Cast", ["t"], ["y"], to=TensorProto.FLOAT),
    ]
    inits = [
        numpy_helper.from_array(rng.uniform(0.5, 2, D).astype(np.float16), "w"),
        numpy_helper.from_array(rng.standard_normal(D).astype(np.float16), "b"),
    ]
    f32 = TensorProto.FLOAT
    return _model(nodes, [value("x", f32), value("r", f32)], [value("y", f32)], inits)


def test_float16_model_with_float32_boundaries_is_checked_in_float16(tmp_path):
    """The float32 outputs carry float16 rounding: held to float32's tolerance, every fusion that
    rounds differently inside was refused."""
    optimized, _ = graphopt.optimize(_float16_inside(tmp_path))
    assert any(n.domain == "graphopt" for n in optimized.graph.node)


def test_a_float32_output_computed_in_float32_keeps_float32_tolerance(tmp_path):
    """Only a model whose every wider output is computed through 16-bit values is held to the 16-bit
    tolerance: one float32 output computed in float32 alone keeps float32's for the whole model."""
    from graphopt.frontends.onnx import from_onnx
    from graphopt.ir import DType
    from graphopt.verification.checking import _computed_precision
    from graphopt.verification.numeric import resolve_tolerances

    inside, defaults = _float16_inside(tmp_path), resolve_tolerances(None)
    assert _computed_precision(from_onnx(inside), None)[DType.FLOAT32] == defaults[DType.FLOAT16]

    mixed = onnx.ModelProto()
    mixed.CopyFrom(inside)
    mixed.graph.node.append(helper.make_node("Tanh", ["x"], ["z"]))
    mixed.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, ["b", "s", D]))
    assert _computed_precision(from_onnx(mixed), None) == defaults


def test_a_tolerance_given_for_float32_still_holds(tmp_path):
    with pytest.raises(graphopt.VerificationError):
        graphopt.optimize(_float16_inside(tmp_path), tolerances={"float32": (1e-6, 1e-7)})


def test_erf_gelu_fallback_is_one_gelu_in_onnx_runtime(tmp_path):
    """Without graphopt's library, ONNX Runtime runs a fused op's function body: GELU spelled so that
    its own Gelu fusion applies, as it did to the original."""
    rng = np.random.default_rng(0)

    def value(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["b", "s", D])

    def scalar(name, v):
        return numpy_helper.from_array(np.float32(v), name)

    nodes = [
        helper.make_node("LayerNormalization", ["x", "w", "b"], ["n"], axis=-1),
        helper.make_node("Div", ["n", "sq2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["n", "e1"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(rng.uniform(0.5, 2, D).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "b"),
        scalar("sq2", np.sqrt(2)),
        scalar("one", 1),
        scalar("half", 0.5),
    ]
    model = _model(nodes, [value("x")], [value("y")], inits)
    optimized, _ = graphopt.optimize(model)
    assert any(n.domain == "graphopt" for n in optimized.graph.node)
    assert _ort_ops(optimized, tmp_path)["Gelu"] == _ort_ops(model, tmp_path)["Gelu"] == 1


class _Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        return torch.relu(self.norm(x))


def test_pt2_extra_files_are_kept(tmp_path):
    source, target = tmp_path / "m.pt2", tmp_path / "m.opt.pt2"
    program = torch.export.export(_Norm().eval(), (torch.randn(2, 8),))
    torch.export.save(program, source, extra_files={"tokenizer.json": '{"v": 1}', "notes.txt": "x"})
    graphopt.optimize(str(source), output=str(target))
    extra = {"tokenizer.json": "", "notes.txt": ""}
    torch.export.load(target, extra_files=extra)
    assert extra == {"tokenizer.json": '{"v": 1}', "notes.txt": "x"}
    assert sum("/extra/" in name for name in zipfile.ZipFile(target).namelist()) == 2


def test_pt2_archive_of_several_programs_is_refused_not_cut(tmp_path):
    """torch.export.load returns the program named "model" alone: an archive of several (PyTorch's
    package_pt2) was optimized as that one program and written back without the others."""
    package = pytest.importorskip("torch.export.pt2_archive._package")
    program = torch.export.export(_Norm().eval(), (torch.randn(2, 8),))
    source = tmp_path / "two.pt2"
    package.package_pt2(str(source), exported_programs={"model": program, "second": program})
    with pytest.raises(graphopt.BadInput, match="holds 2 exported programs"):
        graphopt.optimize(str(source), output=str(tmp_path / "two.opt.pt2"))
    assert not (tmp_path / "two.opt.pt2").exists()
