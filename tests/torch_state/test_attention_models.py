"""An optimized attention model computes what the original computes wherever it runs: eagerly and
under torch.compile, with whichever attention kernel the machine picks (their outputs' layouts differ:
the CPU's flash kernel and CUDA's memory-efficient one write [batch, tokens, heads, dim], the math
kernel [batch, heads, tokens, dim]), and after torch.export's save and load.

Exported on the CPU with the default kernel, as a user would; run with each kernel here, against the
float64 result of the original module."""

import warnings

import numpy as np
import pytest
import torch
from attention_models import MODELS, built, exported
from exporting import float64_reference
from torch.nn.attention import SDPBackend, sdpa_kernel

import graphopt

pytestmark = pytest.mark.slow

KERNELS = {"default": None, "math": [SDPBackend.MATH]}


@pytest.fixture(scope="module", params=list(MODELS))
def case(request):
    module, inputs = built(request.param)
    original = exported(module, inputs)
    optimized, report = graphopt.optimize(original)
    assert report.verification["ok"]
    assert any(op.startswith("graphopt") for op in report.ops_after)
    return optimized, inputs, float64_reference(module, inputs)[0], original


def _skip_where_the_original_fails(original, inputs, kernel):
    """A program exported with one attention kernel may bake that kernel's output layout into its
    views (torch.export writes a reshape as a view where the traced layout allowed one): where the
    original program itself cannot run with this kernel, there is nothing to match."""
    with _with_kernel(kernel), torch.no_grad():
        try:
            original.module()(*inputs)
        except RuntimeError as error:
            pytest.skip(f"the original program fails with the {kernel} kernel too: {str(error)[:80]}")


def _with_kernel(kernel: str):
    backends = KERNELS[kernel]
    return sdpa_kernel(backends) if backends else warnings.catch_warnings()


def _assert_matches(got: torch.Tensor, expected: np.ndarray) -> None:
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_optimized_module_matches_the_float64_original(case, kernel):
    optimized, inputs, expected, original = case
    _skip_where_the_original_fails(original, inputs, kernel)
    with _with_kernel(kernel), torch.no_grad():
        _assert_matches(optimized.module()(*inputs), expected)


@pytest.mark.parametrize("kernel", KERNELS)
def test_torch_compile_of_the_optimized_module_matches_the_float64_original(case, kernel):
    optimized, inputs, expected, original = case
    _skip_where_the_original_fails(original, inputs, kernel)
    torch._dynamo.reset()
    with _with_kernel(kernel), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # aot_eager: Dynamo and AOT autograd trace the whole module (fullgraph raises at any break),
        # without a C++ build of the CPU kernels
        compiled = torch.compile(optimized.module(), fullgraph=True, backend="aot_eager")
        _assert_matches(compiled(*inputs), expected)


def test_a_saved_program_loads_and_computes_the_same(case, tmp_path):
    optimized, inputs, expected, _ = case
    torch.export.save(optimized, tmp_path / "model.pt2")
    loaded = torch.export.load(tmp_path / "model.pt2")
    with torch.no_grad():
        got = loaded.module()(*inputs)
        torch.testing.assert_close(got, optimized.module()(*inputs), rtol=0, atol=0)
    _assert_matches(got, expected)
