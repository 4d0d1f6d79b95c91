"""batch_embedding_lookups in each runtime: the batched lookups give the original's rows exactly, and
an index out of range of its own table does what it did in the original, runtime by runtime (the
EmbeddingLookups spec lists them): ONNX Runtime's CPU EP with graphopt's library fails with the very
message the original Gather gave; without the library (the fallback function) it fails with Gather's
message for the concatenated table; torch on a CPU raises the original's IndexError; torch on CUDA
loses its launch, as the original's device-side assert does."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from exporting import ONNX_PATHS, export_onnx, feeds_for, float64_reference, optimize_checked
from lookup_models import FEATURES, StackedLookups, ids_for
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

import graphopt
from graphopt.ort import create_session
from models.embeddings import EmbeddingStack, example_indices, vocab_sizes

RULE = "batch_embedding_lookups"
ONLY_LOOKUPS = [RULE, "remove_dead_nodes"]
LIBRARY = {"library": True, "fallback_function": False}
REPO = Path(__file__).resolve().parents[2]


def run_ort(model, ids, library: bool):
    session = create_session(model, providers=["CPUExecutionProvider"], use_library=library)
    return session.run(None, feeds_for(model, ids))


def optimized_lookups(path, rows):
    model = export_onnx(StackedLookups(rows), ids_for(rows), path)
    optimized, report = optimize_checked(model, only=ONLY_LOOKUPS)
    assert report.rule_counts[RULE] == 1
    assert [n.op_type for n in optimized.graph.node].count("EmbeddingLookups") == 1
    return model, optimized


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("runtime", LIBRARY)
def test_lookups_are_exact_in_onnx_runtime_with_negative_indices(path, runtime):
    rows = vocab_sizes(FEATURES)
    model, optimized = optimized_lookups(path, rows)
    ids = tuple(torch.tensor([0, r - 1, -1, -r, 3, 1]) for r in rows)
    (expected,) = run_ort(model, ids, library=False)
    np.testing.assert_array_equal(run_ort(optimized, ids, LIBRARY[runtime])[0], expected)


def _message(error) -> str:
    """What ONNX Runtime says went wrong, less the node that said it."""
    return str(error.value).split("Status Message: ")[-1].split(": ")[-1]


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("runtime", LIBRARY)
@pytest.mark.parametrize("bad", ["past_own_table", "below_own_table"])
def test_out_of_range_index_fails_as_in_the_original(path, runtime, bad):
    rows = vocab_sizes(FEATURES)
    model, optimized = optimized_lookups(path, rows)
    index = rows[1] if bad == "past_own_table" else -rows[1] - 1  # a neighbour's row once offset
    ids = (torch.arange(6), torch.tensor([2, index, 0, 1, 2, 3]), *(torch.arange(6),) * (FEATURES - 2))
    with pytest.raises(InvalidArgument, match="out of data bounds") as original:
        run_ort(model, ids, library=False)
    with pytest.raises(InvalidArgument, match="out of data bounds") as batched:
        run_ort(optimized, ids, LIBRARY[runtime])
    if runtime == "library":  # the feature's own table's bounds: the original's words exactly
        assert _message(batched) == _message(original)
        assert f"idx={index} must be within the inclusive range [-{rows[1]},{rows[1] - 1}]" in _message(
            original
        )
    else:  # the index was moved past the end of the concatenated table
        total = sum(rows)
        assert _message(batched) == f"indices element out of data bounds, idx={total} must be within the " + (
            f"inclusive range [-{total},{total - 1}]"
        )


def optimized_program(rows):
    module = StackedLookups(rows).eval()
    program = torch.export.export(module, ids_for(rows))
    optimized, report = graphopt.optimize(program, check_each_pass=True, only=ONLY_LOOKUPS)
    assert report.verification["ok"], report.verification["summary"]
    assert report.rule_counts[RULE] == 1
    return module, program, optimized


@pytest.mark.parametrize("index", ["past_own_table", "negative"])
def test_out_of_range_index_fails_in_torch_as_in_the_original(index):
    rows = vocab_sizes(FEATURES)
    module, program, optimized = optimized_program(rows)
    good = tuple(torch.tensor([0, r - 1, 2, 1, 0, 3]) for r in rows)
    torch.testing.assert_close(optimized.module()(*good), module(*good), rtol=0, atol=0)
    value = rows[1] if index == "past_own_table" else -1
    bad = (good[0], torch.tensor([0, value, 1, 1, 1, 1]), *good[2:])
    messages = set()
    for run in (module, program.module(), optimized.module()):
        with pytest.raises(IndexError, match="index out of range in self") as error:
            run(*bad)
        messages.add(str(error.value))
    assert len(messages) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("index", ["past_own_table", "negative"])
def test_out_of_range_index_fails_the_cuda_launch_as_in_the_original(index):
    # Subprocesses: a failed launch loses the CUDA context, the original's as the optimized one's.
    value = {"past_own_table": "rows[1]", "negative": "-1"}[index]
    script = textwrap.dedent(f"""
        import copy, sys, torch, graphopt
        sys.path[:0] = [{str(REPO / "tests" / "passes")!r}, {str(REPO)!r}]
        from lookup_models import StackedLookups, ids_for
        from models.embeddings import vocab_sizes
        rows = vocab_sizes({FEATURES})
        module = StackedLookups(rows).eval()
        reference = copy.deepcopy(module)
        if sys.argv[1] == "original":
            run = module.cuda()
        else:
            program = torch.export.export(module, ids_for(rows))
            optimized, _ = graphopt.optimize(program, only={ONLY_LOOKUPS!r}, verify=False)
            run = optimized.module().cuda()
        good = [torch.tensor([0, r - 1, 2, 1, 0, 3]) for r in rows]
        bad = list(good)
        bad[1] = torch.tensor([0, {value}, 1, 1, 1, 1])
        with torch.no_grad():
            assert torch.equal(run(*[g.cuda() for g in good]).cpu(), reference(*good))
            run(*[b.cuda() for b in bad])
            torch.cuda.synchronize()
        print("no error")
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    for which in ("original", "optimized"):
        done = subprocess.run(
            [sys.executable, "-c", script, which], env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode != 0 and "no error" not in done.stdout, (
            which,
            done.stdout,
            done.stderr[-2000:],
        )
        assert re.search(r"CUDA error|device-side assert|launch failure", done.stderr), done.stderr[-2000:]


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("runtime", LIBRARY)
def test_model_a_matches_the_original_in_onnx_runtime(path, runtime):
    module, args = EmbeddingStack(n=10, d=32), example_indices(10, batch=16)
    model = export_onnx(module, args, path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts[RULE] == 1
    (expected,) = float64_reference(module, args)
    (original,) = run_ort(model, args, library=False)
    (actual,) = run_ort(optimized, args, LIBRARY[runtime])
    np.testing.assert_allclose(original, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_model_a_matches_the_original_in_torch():
    module, args = EmbeddingStack(n=10, d=32).eval(), example_indices(10, batch=16)
    optimized, report = graphopt.optimize(torch.export.export(module, args), check_each_pass=True)
    assert report.rule_counts[RULE] == 1 and report.verification["ok"]
    (expected,) = float64_reference(module, args)
    with torch.no_grad():
        actual, original = optimized.module()(*args).numpy(), module(*args).numpy()
    np.testing.assert_allclose(original, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
