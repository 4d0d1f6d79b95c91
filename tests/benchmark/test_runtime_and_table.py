import torch

import graphopt
from graphopt.benchmark.output import table
from graphopt.runtime import direct_callable
from models.split_stack import SplitStack


def test_direct_callable_computes_what_the_program_computes():
    module = SplitStack(n=4, b=8, d=16)
    x = torch.randn(4 * 8 * 16)
    program = torch.export.export(module, (x,))
    optimized, _ = graphopt.optimize(program)
    fresh = torch.randn(4 * 8 * 16)
    torch.testing.assert_close(direct_callable(optimized)(fresh), module(fresh), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(direct_callable(program)(fresh), program.module()(fresh))


def _result(**fields):
    """A benchmark result as graphopt.benchmark.compare.run returns it (5 µs roofline)."""
    base = {"device": "GPU", "torch": "2.x", "roofline_us": 5.0, "bytes_moved": 15_000_000,
            "copy_bandwidth_TBps": 3.0, "rows": []}  # fmt: skip
    return {**base, **fields}


def test_table_reports_speedup_against_eager_and_roofline():
    result = _result(
        rows=[
            {"variant": "eager PyTorch", "model": "original", "start_to_finish_us": 500.0, "gpu_us": 100.0,
             "max_abs_error": 0.0, "error": None},
            {"variant": "graphopt → ORT CUDA EP", "model": "optimized", "start_to_finish_us": 20.0,
             "gpu_us": 7.5, "max_abs_error": 1e-7, "error": None},
            {"variant": "ORT CUDA EP", "model": "original", "error": "RuntimeError: no CUDA EP"},
        ],
    )  # fmt: skip
    text = table(result)
    assert "25.0×" in text and "1.50" in text
    assert "ORT CUDA EP" in text and "failed: RuntimeError: no CUDA EP" in text


def test_table_lists_the_runtime_floors_and_why_one_is_missing():
    floors = {"torch: one relu": 12.25, "ORT CUDA EP: one Relu": "no CUDA execution provider"}
    result = _result(floors_us=floors)
    lines = table(result).splitlines()
    assert any("torch: one relu" in line and "12.2 µs" in line for line in lines)
    assert any("ORT CUDA EP: one Relu" in line and "not measured: no CUDA" in line for line in lines)
