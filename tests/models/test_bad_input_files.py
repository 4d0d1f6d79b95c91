import onnx
import pytest
import torch

from models import bad_inputs

ONNX_BAD = [b for b in bad_inputs.BAD_INPUTS if b.filename.endswith(".onnx")]
PT2_BAD = [b for b in bad_inputs.BAD_INPUTS if b.filename.endswith(".pt2")]


def test_write_all_writes_every_kind_once(tmp_path):
    paths = bad_inputs.write_all(tmp_path)
    assert set(paths) == {b.name for b in bad_inputs.BAD_INPUTS}
    assert len({p.name for p in paths.values()}) == len(paths)
    assert all(p.parent == tmp_path for p in paths.values())


@pytest.mark.parametrize("bad", bad_inputs.BAD_INPUTS, ids=lambda b: b.name)
def test_bytes_are_deterministic_and_described(bad):
    assert bad.make() == bad.make()
    assert bad.description


@pytest.mark.parametrize("bad", [b for b in ONNX_BAD if b.stage == "unreadable"], ids=lambda b: b.name)
def test_unreadable_onnx_fails_to_load_or_has_no_graph(bad, tmp_path):
    path = bad.write(tmp_path)
    try:
        model = onnx.load(path)
    except Exception:
        return
    assert not model.HasField("graph")


@pytest.mark.parametrize("bad", [b for b in ONNX_BAD if b.stage == "check"], ids=lambda b: b.name)
def test_invalid_graphs_load_but_fail_the_checker(bad, tmp_path):
    model = onnx.load(bad.write(tmp_path))
    assert model.HasField("graph")
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model, full_check=True)


def test_unsupported_opset_is_otherwise_valid(tmp_path):
    model = onnx.load(bad_inputs.get("opset_too_new").write(tmp_path))
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 99)]
    onnx.checker.check_model(model)


@pytest.mark.parametrize("bad", PT2_BAD, ids=lambda b: b.name)
def test_bad_pt2_fails_to_load(bad, tmp_path):
    with pytest.raises(Exception):  # noqa: B017 - torch raises RuntimeError, BadZipFile or a decode error
        torch.export.load(bad.write(tmp_path))


def test_the_valid_originals_do_load(tmp_path):
    (tmp_path / "ok.onnx").write_bytes(bad_inputs.valid_model_bytes())
    onnx.checker.check_model(onnx.load(tmp_path / "ok.onnx"), full_check=True)
    (tmp_path / "ok.pt2").write_bytes(bad_inputs.valid_pt2_bytes())
    assert torch.export.load(tmp_path / "ok.pt2").module()(torch.ones(2, 4)).shape == (2, 4)
