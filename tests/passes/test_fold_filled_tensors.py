"""A tensor that a torch.export program makes fresh and fills in place from constants folds, as the ONNX
exporters fold it (Swin's shifted-window mask, diffusers' UNet1D downsampling weight, Swin-V2's qkv
bias); one whose fills read the input, draw random numbers, are read before the last one, are returned,
or exceed the growth budget stays as the program has it."""

import copy
from collections import Counter

import pytest
import torch
from filled_tensor_models import (
    BiasWithSliceZeroed,
    BufferFilledFromInput,
    FilledAndReturned,
    FilledAtRandom,
    FilledFromInput,
    KernelOnDiagonal,
    LargeFilledReadInPart,
    ReadBeforeFilled,
    ShiftedWindowAttention,
    TwoFilledBeyondBudget,
)
from graphopt.passes.canonicalize import FOLD_CONSTANTS

import graphopt
from graphopt.frontends.torch_export import from_exported_program


def _export(module, shape):
    torch.manual_seed(0)
    module = module.eval()
    return module, torch.export.export(module, (torch.randn(shape),))


def _folded_ir(program):
    """The number of nodes of the program's IR, and the IR after constant folding."""
    graph = from_exported_program(program)
    before = len(list(graph))
    FOLD_CONSTANTS.run(graph)
    return before, graph


def _optimized(program):
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"], report.verification["summary"]
    return optimized


def _calls(program) -> Counter:
    return Counter(str(n.target) for n in program.graph.nodes if n.op == "call_function")


def _assert_computes_as_float64(module, program, optimized, shape):
    reference = copy.deepcopy(module).double()
    for seed in (1, 2):
        torch.manual_seed(seed)
        x = torch.randn(shape)
        expected = reference(x.double())
        for got in (program.module()(x), optimized.module()(x)):
            torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("module", "shape", "gone"),
    [
        (ShiftedWindowAttention(), (2, 8, 8, 8), {"aten.new_zeros.default", "aten.fill_.Tensor"}),
        (KernelOnDiagonal(), (2, 4, 16), {"aten.new_zeros.default", "aten.index_put_.default"}),
        (BiasWithSliceZeroed(), (3, 8), {"aten.clone.default", "aten.zero_.default"}),
    ],
    ids=["swin_window_mask", "unet1d_kernel", "swin_v2_qkv_bias"],
)
def test_a_tensor_filled_in_place_from_constants_folds(module, shape, gone):
    module, program = _export(module, shape)
    assert gone <= set(_calls(program))
    before, graph = _folded_ir(program)
    assert not [node.name for node in graph if node.meta.get("mutates")]
    assert len(list(graph)) <= before - 3
    optimized = _optimized(program)
    assert not gone & set(_calls(optimized)), _calls(optimized)
    _assert_computes_as_float64(module, program, optimized, shape)


def test_the_shifted_window_mask_leaves_only_the_attention():
    _, program = _export(ShiftedWindowAttention(), (2, 8, 8, 8))
    before, graph = _folded_ir(program)
    assert len(list(graph)) <= before - 45  # (nine fills, eighteen slices, the mask's arithmetic)
    calls = _calls(_optimized(program))
    assert not {"aten.masked_fill.Scalar", "aten.ne.Scalar", "aten.eq.Scalar"} & set(calls), calls


@pytest.mark.parametrize(
    ("module", "stays"),
    [
        (FilledFromInput(), "aten.copy_.default"),
        (BufferFilledFromInput(), "aten.copy_.default"),
        (ReadBeforeFilled(), "aten.fill_.Tensor"),
        (FilledAndReturned(), "aten.fill_.Tensor"),
        (LargeFilledReadInPart(), "aten.fill_.Tensor"),
        (TwoFilledBeyondBudget(), "aten.fill_.Tensor"),
    ],
    ids=["reads_the_input", "buffer_from_the_input", "read_before_filled", "returned", "large", "budget"],
)
def test_a_tensor_whose_fill_is_observed_or_not_constant_stays(module, stays):
    module, program = _export(module, (4, 4))
    assert _calls(program)["aten.fill_.Tensor"] >= 9  # (the window mask's)
    optimized = _optimized(program)
    calls = _calls(optimized)
    assert calls[stays] == 1, calls  # (only the other tensor's write; the window mask folded)
    if stays != "aten.fill_.Tensor":
        assert not calls["aten.fill_.Tensor"], calls
    reference = copy.deepcopy(module).double()
    for seed in (1, 2):
        torch.manual_seed(seed)
        x = torch.randn(4, 4)
        for got, expected in zip(optimized.module()(x), reference(x.double()), strict=True):
            torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)


def test_a_tensor_filled_at_random_stays():
    _, program = _export(FilledAtRandom(), (4, 4))
    optimized, _ = graphopt.optimize(program, verify=False)  # (the check refuses random outputs)
    calls = _calls(optimized)
    assert calls["aten.uniform_.default"] == 1 and not calls["aten.fill_.Tensor"], calls
    x = torch.randn(4, 4)
    torch.manual_seed(3)
    expected = program.module()(x)
    torch.manual_seed(3)
    for got, want in zip(optimized.module()(x), expected, strict=True):
        torch.testing.assert_close(got, want)
