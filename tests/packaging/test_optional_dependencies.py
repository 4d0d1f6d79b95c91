"""graphopt without its optional dependencies: it imports and works, and says what to install where a
feature needs one. Each test runs Python in a subprocess with the packages hidden (a None entry in
sys.modules makes ``import`` fail as if they were not installed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "models" / "split_stack.onnx"


def run_without(hidden: tuple[str, ...], code: str) -> subprocess.CompletedProcess:
    prelude = f"import sys\nfor name in {hidden!r}:\n    sys.modules[name] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, cwd=REPO, timeout=300
    )


def cli_without(hidden: tuple[str, ...], *args: str) -> subprocess.CompletedProcess:
    code = f"sys.argv = ['graphopt', *{list(args)!r}]\nfrom graphopt.cli import main\nmain()"
    return run_without(hidden, code)


@pytest.mark.slow
def test_optimizes_onnx_and_torch_models_without_triton_or_pydot(tmp_path):
    code = f"""
import torch
import graphopt
from graphopt.fused import torch_ops

x = torch.randn(4, 8, dtype=torch.float64)
y = torch.ops.graphopt.norm_act(x, None, None, "layer", "relu", 1e-5, -1)
expected = torch.relu(torch.nn.functional.layer_norm(x, (8,), eps=1e-5))
assert torch.allclose(y, expected), (y, expected)
for model in ("split_stack.onnx", "split_stack.pt2"):
    _, report = graphopt.optimize({str(REPO / "models")!r} + "/" + model)
    assert report.verification["ok"], report.verification
print("triton" in sys.modules and sys.modules["triton"] is not None)
"""
    result = run_without(("triton", "pydot"), code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    # torch's triton_op warns once per op when it cannot look for kernels; those ops are plain custom ops.
    assert "Triton not available" not in result.stderr, result.stderr


def test_fused_op_on_cuda_without_triton_names_the_package():
    code = """
from graphopt.dependencies import MissingDependency
from graphopt.fused import torch_triton
try:
    torch_triton.launcher("graphopt.fused.norm_act.triton_kernel", "launch_norm_act")
except MissingDependency as error:
    print(error)
"""
    result = run_without(("triton",), code)
    assert result.returncode == 0, result.stderr
    assert "needs triton, which is not installed; pip install triton" in result.stdout


def test_show_without_pydot_draws_with_matplotlib_or_says_what_to_install(tmp_path):
    picture = tmp_path / "seed.svg"
    result = cli_without(("pydot",), "show", str(SEED), "-o", str(picture))
    assert result.returncode == 0, result.stderr
    assert picture.read_bytes().lstrip().startswith((b"<?xml", b"<svg"))

    result = cli_without(("pydot",), "show", str(SEED), "--engine", "graphviz", "-o", str(tmp_path / "x.svg"))
    assert result.returncode == 2
    assert "graphopt[show]" in result.stderr or "apt-get install graphviz" in result.stderr, result.stderr
    assert not (tmp_path / "x.svg").exists()


def test_check_without_onnxruntime_is_one_line_naming_both_extras(tmp_path):
    output = tmp_path / "seed.opt.onnx"
    result = cli_without(("onnxruntime",), "optimize", str(SEED), "-o", str(output))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "needs onnxruntime, which is not installed" in lines[0]
    assert "graphopt[cpu]" in lines[0] and "graphopt[gpu]" in lines[0] and "--no-verify" in lines[0]
    assert not output.exists()

    result = cli_without(("onnxruntime",), "optimize", str(SEED), "-o", str(output), "--no-verify")
    assert result.returncode == 0, result.stderr
    assert output.exists()


def test_ort_session_without_onnxruntime_raises_an_import_error():
    code = f"""
import graphopt.ort
try:
    graphopt.ort.create_session({str(SEED)!r}, use_library=False)
except ImportError as error:
    print(type(error).__name__, error)
"""
    result = run_without(("onnxruntime",), code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("MissingDependency ")
    assert "graphopt[cpu]" in result.stdout
