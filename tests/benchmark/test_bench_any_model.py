"""graphopt bench on any model, on the CPU: ONNX and .pt2, token-id inputs, symbolic dims, dtypes."""

import json

import numpy as np
import torch
from cli_run import graphopt as graphopt_cli
from torch import nn

from graphopt.benchmark.inputs import model_feeds


class TokenModel(nn.Module):
    def __init__(self, vocab=37, d=16):
        super().__init__()
        self.embed, self.norm = nn.Embedding(vocab, d), nn.LayerNorm(d)

    def forward(self, ids):
        return torch.tanh(self.norm(self.embed(ids)))


def _pt2(tmp_path, batch_dynamic=False):
    ids = torch.randint(0, 37, (4, 8))
    dynamic = {"ids": {0: torch.export.Dim("batch")}} if batch_dynamic else None
    program = torch.export.export(TokenModel().eval(), (ids,), dynamic_shapes=dynamic)
    path = tmp_path / "tokens.pt2"
    torch.export.save(program, path)
    return path


def test_token_ids_come_from_the_vocabulary(tmp_path):
    feeds = model_feeds(_pt2(tmp_path), seed=0)
    (ids,) = feeds.values()
    assert ids.dtype == np.int64 and ids.max() < 37 and ids.max() > 2


def test_bench_a_pt2_on_the_cpu(tmp_path):
    path = _pt2(tmp_path, batch_dynamic=True)
    result = graphopt_cli(
        "bench", path, "--device", "cpu", "--no-compile", "--iters", "3", "--out", tmp_path / "out",
        "--input-shape", "ids:2x8", "--dtype", "fp32",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    record = json.loads((tmp_path / "out" / "bench_tokens_cpu.json").read_text())
    assert record["inputs"]["ids"]["shape"] == [2, 8]
    rows = {r["variant"]: r for r in record["rows"]}
    torch_rows = [n for n in rows if "PyTorch" in n]
    # Every call of graphopt's program has the original's call of the same kind next to it.
    assert sorted(torch_rows) == sorted(
        f"{who} PyTorch{how}" for who in ("eager", "graphopt →") for how in ("", " (no_grad)", " (direct)")
    )
    for name in ("ORT CPU EP", "graphopt → ORT CPU EP", *torch_rows):
        assert rows[name]["error"] is None, rows[name]["error"]
        assert rows[name]["start_to_finish_us"] > 0 and rows[name]["max_abs_error"] < 1e-4
        assert rows[name]["noise"] >= 0 and rows[name]["extra"]["rounds"] == 3  # (--iters 3: 3 rounds of 1)
    assert rows["ORT transformer optimizer → ORT CPU EP"]["error"].startswith("skipped: ")
    assert (tmp_path / "out" / "bench_tokens_cpu.png").exists()


def test_bench_an_onnx_model_on_the_cpu_with_ort_optimizer(tmp_path):
    result = graphopt_cli(
        "bench", "models/mlp.onnx", "--device", "cpu", "--iters", "3", "--out", tmp_path,
        "--ort-model-type", "bert",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    rows = {r["variant"]: r for r in json.loads((tmp_path / "bench_mlp_cpu.json").read_text())["rows"]}
    for name in ("ORT CPU EP", "graphopt → ORT CPU EP", "ORT transformer optimizer → ORT CPU EP"):
        assert rows[name]["error"] is None, rows[name]["error"]
    assert rows["eager PyTorch"]["error"] == "skipped: no PyTorch program (give a .pt2 archive)"


def test_bench_refuses_a_dtype_for_onnx(tmp_path):
    result = graphopt_cli("bench", "models/mlp.onnx", "--device", "cpu", "--dtype", "fp16", "--out", tmp_path)
    assert result.returncode == 2 and "--dtype fp16" in result.stderr
