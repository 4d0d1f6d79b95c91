import json

import numpy as np
import onnx
import pytest
import torch
from broken_pass import TanhChain, tanh_chain
from cli_run import assert_bad_input, graphopt, graphopt_process

from graphopt.errors import BadInput
from graphopt.verification.compare import verify_models


def _save(model, path):
    onnx.save(model, str(path))
    return path


def _with_op(model, index, op_type):
    changed = onnx.ModelProto()
    changed.CopyFrom(model)
    changed.graph.node[index].op_type = op_type
    return changed


def test_identical_models_agree_exit_0(tmp_path):
    a = _save(tanh_chain(), tmp_path / "a.onnx")
    result = graphopt_process("verify", a, a)
    assert result.returncode == 0, result.stderr
    assert "the models agree" in result.stdout
    assert "max abs" in result.stdout and "yes" in result.stdout


def test_different_models_disagree_exit_1_with_the_table(tmp_path):
    a = _save(tanh_chain(), tmp_path / "a.onnx")
    b = _save(_with_op(tanh_chain(), 2, "Sigmoid"), tmp_path / "b.onnx")
    report = tmp_path / "verdict.json"
    result = graphopt_process("verify", a, b, "--report-json", report)
    assert result.returncode == 1
    assert "the models differ" in result.stdout and "max abs error" in result.stdout
    verdict = json.loads(report.read_text())
    assert verdict["ok"] is False
    assert verdict["outputs"][0]["name"] == "y" and verdict["outputs"][0]["max_abs"] > 0.1


def test_the_tolerance_option_decides(tmp_path):
    a = _save(tanh_chain(), tmp_path / "a.onnx")
    looser = tanh_chain()
    scale = onnx.numpy_helper.to_array(looser.graph.initializer[0]) * np.float32(1.001)
    looser.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(scale, "scale"))
    b = _save(looser, tmp_path / "b.onnx")
    assert graphopt("verify", a, b).returncode == 1
    assert graphopt("verify", a, b, "--tolerance", "float32=1e-2,1e-3").returncode == 0
    assert graphopt("verify", a, b, "--tolerance", "float16=1e-2,1e-3").returncode == 1


def test_real_inputs_decide(tmp_path):
    relu = _save(_with_op(tanh_chain(1), 0, "Relu"), tmp_path / "relu.onnx")
    identity = _save(_with_op(tanh_chain(1), 0, "Identity"), tmp_path / "identity.onnx")
    positive = tmp_path / "positive.npz"
    np.savez(positive, x=np.abs(np.random.default_rng(0).standard_normal((2, 8))).astype(np.float32))
    assert graphopt("verify", relu, identity).returncode == 1
    result = graphopt("verify", relu, identity, "--inputs", positive)
    assert result.returncode == 0, result.stdout + result.stderr


def test_bad_inputs_exit_2(tmp_path):
    a = _save(tanh_chain(), tmp_path / "a.onnx")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x07not a model")
    assert_bad_input(graphopt_process("verify", a, tmp_path / "missing.onnx"), "no such file")
    assert_bad_input(graphopt("verify", a, garbage), "not an ONNX model")
    assert_bad_input(graphopt("verify", garbage, a), "not an ONNX model")
    renamed = tanh_chain()
    renamed.graph.input[0].name = "z"
    renamed.graph.node[0].input[0] = "z"
    other = _save(renamed, tmp_path / "other.onnx")
    assert_bad_input(graphopt("verify", a, other), "expected the same inputs")
    assert_bad_input(graphopt("verify", a, a, "--tolerance", "lots"), "expected [DTYPE=]RTOL,ATOL")


def test_an_onnx_model_and_a_program_are_not_comparable(tmp_path):
    a = _save(tanh_chain(), tmp_path / "a.onnx")
    program = tmp_path / "a.pt2"
    torch.export.save(torch.export.export(TanhChain(), (torch.randn(2, 8),)), program)
    with pytest.raises(BadInput, match=r"is an ONNX model and .* is a torch.export archive; expected two"):
        verify_models(a, program)


def test_programs_are_compared_in_torch(tmp_path):
    same, other = tmp_path / "same.pt2", tmp_path / "other.pt2"
    example = (torch.randn(2, 8),)
    torch.export.save(torch.export.export(TanhChain(5), example), same)
    torch.export.save(torch.export.export(TanhChain(4), example), other)
    assert verify_models(same, same)["ok"]
    verdict = verify_models(same, other)
    assert not verdict["ok"] and verdict["outputs"][0]["name"] == "output_0"


def test_an_output_count_mismatch_disagrees(tmp_path):
    a = _save(tanh_chain(), tmp_path / "a.onnx")
    two = tanh_chain()
    two.graph.output.append(onnx.helper.make_tensor_value_info("h1", onnx.TensorProto.FLOAT, [2, 8]))
    b = _save(two, tmp_path / "b.onnx")
    verdict = verify_models(a, b)
    assert not verdict["ok"] and "expected 1 output(s), got 2" in verdict["summary"]


@pytest.mark.parametrize("shape", ["x:3x8", "x:1x8"])
def test_input_shapes_reach_the_check(tmp_path, shape):
    a = _save(tanh_chain(batch="batch"), tmp_path / "a.onnx")
    verdict = verify_models(a, a, input_shapes={"x": [int(d) for d in shape[2:].split("x")]})
    assert verdict["inputs"]["x"]["shape"] == [int(d) for d in shape[2:].split("x")]
