"""optimize --measure: the original and optimized model timed before writing; a slower one is refused,
or with --keep-paying-passes built without the passes that did not pay."""

import json

import onnx
import pytest
import torch
from cli_run import assert_bad_input, graphopt
from slowing_pass import PASS_NAME, SLOWING_PASS

import graphopt as api
from graphopt import pipeline
from graphopt.verification.speed_guard import SlowerModel, SpeedCheck
from models.onnx_export import export_torchscript
from models.split_stack import SplitStack


@pytest.fixture
def slowing_pipeline(monkeypatch):
    # Last, so that keep-paying-passes tries dropping it first: its timing is tens of times apart,
    # where dropping any other pass first would be judged by timings within a busy machine's noise.
    monkeypatch.setattr(pipeline, "PIPELINE", (*pipeline.PIPELINE, SLOWING_PASS))


@pytest.fixture
def seed_model(tmp_path):
    """The seed at a size where a call takes tens of microseconds, so timing rounds are quick."""
    module = SplitStack(n=16, b=32, d=32).eval()
    model = export_torchscript(module, (torch.randn(16 * 32 * 32),), input_names=["input_data"])
    path = tmp_path / "split_stack.onnx"
    onnx.save(model, path)
    return path


def test_a_faster_model_is_written_with_its_figures(seed_model, tmp_path):
    report_path = tmp_path / "report.json"
    result = graphopt("optimize", seed_model, "--measure", "cpu", "--report-json", report_path)
    assert result.returncode == 0, result.stderr
    speed = json.loads(report_path.read_text())["speed"]
    assert speed["device"] == "cpu" and speed["runtime"] == "ONNX Runtime CPU EP"
    assert speed["optimized_us"] > 0 and speed["original_us"] > 0 and not speed["slower"]
    assert speed["rounds"] >= 5 and speed["noise"] >= 0.02
    assert (tmp_path / "split_stack.opt.onnx").exists()


def test_a_slower_model_is_refused_with_the_figures(seed_model, tmp_path, slowing_pipeline):
    result = graphopt("optimize", seed_model, "--measure", "cpu")
    assert result.returncode == 1
    message = result.stderr.strip()
    assert "the optimized model is slower" in message and "ONNX Runtime CPU EP on cpu" in message
    assert "µs" in message and "noise" in message and "nothing written" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["split_stack.onnx"]


def test_the_api_raises_with_the_report(seed_model, slowing_pipeline):
    with pytest.raises(SlowerModel) as raised:
        api.optimize(seed_model, measure="cpu")
    assert raised.value.report is not None
    assert any(p.name == PASS_NAME for p in raised.value.report.passes)


def test_keep_paying_passes_drops_the_pass_that_slowed_it(seed_model, tmp_path, slowing_pipeline):
    output = tmp_path / "fast.onnx"
    optimized, report = api.optimize(seed_model, output=output, measure="cpu", keep_paying_passes=True)
    assert PASS_NAME not in [p.name for p in report.passes]
    assert any(PASS_NAME in note for note in report.notes)
    assert report.verification["ok"] and not report.speed["slower"]
    assert [n.op_type for n in onnx.load(output).graph.node] == ["Reshape", "NormActLinear"]
    assert [n.op_type for n in optimized.graph.node] == ["Reshape", "NormActLinear"]


def test_an_unknown_device_is_bad_input(seed_model, tmp_path):
    assert_bad_input(graphopt("optimize", seed_model, "--measure", "tpu"), "--measure 'tpu'", "cpu, cuda")
    assert_bad_input(graphopt("optimize", seed_model, "--keep-paying-passes"), "give --measure cpu|cuda")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["split_stack.onnx"]


@pytest.mark.parametrize(
    ("ratio", "noise", "slower", "faster"),
    [(1.01, 0.02, False, False), (1.03, 0.02, True, False), (1.05, 0.06, False, False),
     (0.97, 0.02, False, True), (0.5, 1.5, False, False)],
)  # fmt: skip
def test_slower_and_faster_mean_beyond_the_noise(ratio, noise, slower, faster):
    check = SpeedCheck("cpu", "ONNX Runtime CPU EP", 100.0, 100.0 * ratio, ratio, noise, 15)
    assert check.slower is slower and check.faster is faster
