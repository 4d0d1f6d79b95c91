"""bench/bench_real_models.py's comparison of graphopt with each runtime without it: which rows pair up,
the verdict beyond the two rows' noise, and a recorded run's report drawn again from its JSON."""

import json

from bench import bench_real_models


def _row(variant, us, noise=0.02):
    return {"variant": variant, "model": "x", "start_to_finish_us": us, "gpu_us": None,
            "max_abs_error": 0.0, "error": None, "noise": noise, "extra": {}}  # fmt: skip


def _record():
    rows = [
        _row("ORT CUDA EP", 1000.0), _row("graphopt → ORT CUDA EP", 800.0),  # faster
        _row("eager PyTorch", 1000.0, 0.10), _row("graphopt → PyTorch", 1150.0, 0.10),  # same: 15% < 20%
        _row("eager PyTorch (no_grad)", 1000.0), _row("graphopt → PyTorch (no_grad)", 1100.0),  # slower
        _row("torch.compile (default)", 500.0), _row("graphopt → torch.compile (default)", 400.0),
        _row("eager PyTorch + CUDA graph", 300.0),
        {**_row("graphopt → PyTorch + CUDA graph", None), "error": "RuntimeError: no"},  # (no pair)
    ]  # fmt: skip
    return {"model": "bert", "dtype": "fp16", "exporter": "dynamo", "rows": rows}


def test_each_graphopt_row_is_judged_against_the_same_runtime_beyond_the_noise():
    lines = [line for line in bench_real_models.verdicts([_record()]) if line.startswith("- ")]
    verdicts = {line.split(": ")[1].split(" / ")[0]: line.rsplit(": ", 1)[1] for line in lines}
    assert verdicts == {
        "graphopt → ORT CUDA EP": "faster",
        "graphopt → PyTorch": "same",
        "graphopt → PyTorch (no_grad)": "slower",
        "graphopt → torch.compile (default)": "faster",
    }


def test_a_recorded_run_is_drawn_again_from_its_json(tmp_path):
    path = tmp_path / "real_models.json"
    path.write_text(json.dumps({"device": "CPU", "date": "2026-11-27 00:00 UTC", "commands": ["x"],
                                "timing": {"rounds": 3, "block": 1}, "records": [_record()]}))  # fmt: skip

    assert bench_real_models.main(["--redraw", str(path)]) == 0

    report = path.with_suffix(".md").read_text()
    assert "graphopt → PyTorch (no_grad) / eager PyTorch (no_grad) = 1.10 (noise ±4.0%): slower" in report
    assert path.with_suffix(".png").stat().st_size > 1000


def test_rows_name_the_exporter_that_wrote_their_onnx_model():
    record = {**_record(), "model": "pixart", "onnx_exporter": "torchscript"}

    table = [line for line in bench_real_models.markdown({"device": "CPU", "date": "-", "records": [record]})
             .splitlines() if line.startswith("| pixart")]  # fmt: skip

    exports = {line.split(" | ")[3]: line.split(" | ")[2] for line in table}
    assert exports["ORT CUDA EP"] == "torchscript (ONNX)"
    assert exports["graphopt → ORT CUDA EP"] == "torchscript (ONNX)"
    assert exports["eager PyTorch"] == "dynamo"  # (the PyTorch rows run the exported program)


def test_bf16_is_timed_in_pytorch_only(tmp_path):
    status = bench_real_models.main(
        ["--out", str(tmp_path), "--device", "cpu", "--tiny", "--models", "seed_n128", "--dtypes", "bf16",
         "--no-compile", "--rounds", "1", "--block", "1"]
    )  # fmt: skip
    assert status == 0
    (record,) = json.loads((tmp_path / "real_models.json").read_text())["records"]
    assert record["onnx_export_error"] == "skipped: bf16 is timed in PyTorch only"
    timed = {r["variant"]: r for r in record["rows"] if r["start_to_finish_us"]}
    assert {"eager PyTorch", "graphopt → PyTorch"} <= set(timed)
    assert not [v for v in timed if "ORT" in v]
    assert timed["graphopt → PyTorch"]["max_abs_error"] < 0.05
