import numpy as np
import pytest
import torch
from exporting import ONNX_PATHS, export_onnx, feeds_for, float64_reference, optimize_checked, run_onnx

import graphopt
from models.embeddings import (
    Dlrm,
    EmbeddingStack,
    HandBatched,
    HandBatchedDlrm,
    dlrm_inputs,
    example_indices,
    jagged_dlrm_inputs,
)


def test_hand_batched_computes_what_the_per_feature_model_does():
    module = EmbeddingStack(n=5, d=8).eval()
    ids = example_indices(5, batch=7)
    with torch.no_grad():
        torch.testing.assert_close(HandBatched(module)(*ids), module(*ids), rtol=0, atol=0)


def test_hand_batched_needs_the_shared_norm():
    with pytest.raises(ValueError, match="shared-norm"):
        HandBatched(EmbeddingStack(n=2, d=8, shared_norm=False))


@pytest.mark.parametrize(("mode", "weighted"), [("sum", False), ("mean", False), ("sum", True)])
@pytest.mark.parametrize("path", (*ONNX_PATHS, "torch.export"))
def test_dlrm_optimizes_to_the_same_function(path, mode, weighted):
    module = Dlrm(n=3, d=4, mode=mode, weighted=weighted).eval()
    args = dlrm_inputs(3, batch=5, weighted=weighted)
    (expected,) = float64_reference(module, args)
    if path == "torch.export":
        optimized, report = graphopt.optimize(torch.export.export(module, args), check_each_pass=True)
        assert report.verification["ok"], report.verification["summary"]
        actual = optimized.module()(*args).detach().numpy()
    else:
        model = export_onnx(module, args, path)
        optimized, _ = optimize_checked(model)
        actual = run_onnx(optimized, feeds_for(optimized, args))[0]
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("mode", "weighted"), [("sum", False), ("mean", False), ("sum", True)])
def test_hand_batched_dlrm_computes_what_the_per_feature_model_does(mode, weighted):
    module = Dlrm(n=5, d=4, mode=mode, weighted=weighted).eval()
    args = dlrm_inputs(5, batch=6, weighted=weighted)
    with torch.no_grad():
        torch.testing.assert_close(HandBatchedDlrm(module)(*args), module(*args), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("last_offset", [False, True])
@pytest.mark.parametrize(("mode", "weighted"), [("sum", False), ("mean", False), ("sum", True)])
def test_hand_batched_jagged_dlrm_computes_what_the_per_feature_model_does(mode, weighted, last_offset):
    module = Dlrm(n=5, d=4, mode=mode, weighted=weighted, jagged=True, last_offset=last_offset).eval()
    args = jagged_dlrm_inputs(5, batch=6, weighted=weighted, last_offset=last_offset)
    with torch.no_grad():
        torch.testing.assert_close(HandBatchedDlrm(module)(*args), module(*args), rtol=1e-6, atol=1e-6)
