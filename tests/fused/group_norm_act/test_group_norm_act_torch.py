"""torch.ops.graphopt.group_norm_act and add_group_norm_act on the CPU (plain torch) against the
float64 reference, their fake implementations under torch.export, and their refusals."""

import numpy as np
import pytest
import torch

from graphopt.fused import register_torch_ops
from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.spec import Activation

ops = register_torch_ops()
TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}


def randn(*shape, dtype=torch.float32, mean=0.0, std=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * std + mean).to(dtype)


def f64(t):
    return None if t is None else t.double().numpy()


def assert_close(actual, expected, dtype):
    tol = TOLERANCE[dtype]
    atol = tol * max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(f64(actual), expected, rtol=tol, atol=atol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("activation", [a.attr for a in Activation])
def test_group_norm_act_matches_reference(activation, dtype):
    x, w, b = randn(2, 8, 3, 4, dtype=dtype), randn(8, dtype=dtype, seed=1), randn(8, dtype=dtype, seed=2)
    y = ops.group_norm_act(x, w, b, 4, activation, 1e-5)
    assert y.dtype == dtype and y.shape == x.shape
    expected, _ = GROUP_NORM_ACT.reference(
        f64(x), f64(w), f64(b), groups=4, activation=activation, epsilon=1e-5
    )
    assert_close(y, expected, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_add_group_norm_act_normalizes_the_sum_rounded_to_storage(dtype):
    x, r = randn(2, 6, 5, dtype=dtype), randn(2, 6, 5, dtype=dtype, seed=3)
    y, total = ops.add_group_norm_act(x, r, None, None, 3, "silu", 1e-5)
    stored = (x.float() + r.float()).to(dtype)
    assert torch.equal(total, stored)
    expected, _ = GROUP_NORM_ACT.reference(f64(stored), groups=3, activation="silu", epsilon=1e-5)
    assert_close(y, expected, dtype)


def test_cpu_computes_what_the_native_group_norm_and_activation_compute():
    x = randn(2, 4, 9, 9, mean=1000.0, std=0.1)
    w, b = randn(4, mean=100.0, std=50.0, seed=4), randn(4, seed=5)
    y = ops.group_norm_act(x, w, b, 2, "silu", 1e-5)
    assert torch.equal(y, torch.nn.functional.silu(torch.nn.functional.group_norm(x, 2, w, b, 1e-5)))


class Block(torch.nn.Module):
    def forward(self, x, r):
        y, total = torch.ops.graphopt.add_group_norm_act(x, r, None, None, 2, "gelu", 1e-6)
        return torch.ops.graphopt.group_norm_act(y, None, None, 4, "silu", 1e-5) + total


def test_export_keeps_one_node_per_op():
    program = torch.export.export(Block(), (randn(2, 8, 3), randn(2, 8, 3, seed=5)))
    targets = [str(n.target) for n in program.run_decompositions().graph.nodes if n.op == "call_function"]
    assert targets.count("graphopt.group_norm_act.default") == 1
    assert targets.count("graphopt.add_group_norm_act.default") == 1


def test_opcheck():
    torch.library.opcheck(ops.group_norm_act.default, (randn(2, 4, 3), randn(4), randn(4), 2, "relu", 1e-5))
    torch.library.opcheck(
        ops.add_group_norm_act.default, (randn(2, 4, 3), randn(2, 4, 3), None, None, 4, "tanh", 0.1)
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((randn(2, 6, 3), None, None, 4, "silu", 1e-5), "6 channels do not split into 4 groups"),
        ((randn(6), None, None, 2, "silu", 1e-5), r"x must be \[N, C, \*\], got rank 1"),
        ((randn(2, 6, 3), None, None, 2, "swish", 1e-5), "unknown activation 'swish'"),
    ],
)
def test_bad_arguments_are_named(args, message):
    with pytest.raises((RuntimeError, ValueError), match=message):
        ops.group_norm_act(*args)


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 32, 16, 16), (1, 64, 96, 96), (3, 8, 5)])
def test_cuda_kernel_matches_reference(shape, dtype):
    x, r = randn(*shape, dtype=dtype).cuda(), randn(*shape, dtype=dtype, seed=6).cuda()
    w, b = randn(shape[1], dtype=dtype, seed=7).cuda(), randn(shape[1], dtype=dtype, seed=8).cuda()
    y, total = ops.add_group_norm_act(x, r, w, b, 4, "silu", 1e-5)
    stored = (x.float() + r.float()).to(dtype)
    assert torch.equal(total, stored)
    expected, _ = GROUP_NORM_ACT.reference(
        f64(stored.cpu()), f64(w.cpu()), f64(b.cpu()), groups=4, activation="silu", epsilon=1e-5
    )
    assert_close(y.cpu(), expected, dtype)


@needs_gpu
@pytest.mark.parametrize(
    ("shape", "kernels"),
    [
        ((2, 8, 3), ["group_norm_act_kernel"]),
        ((2, 8, 64, 64), ["group_norm_stats_kernel", "group_norm_apply_kernel"]),
    ],
)  # (2, 8, 64, 64): runs of 8192 and 16384 (4 and 8 of them): the split kernels
def test_cuda_op_compiles_without_graph_breaks(shape, kernels):
    from torch._inductor.utils import run_and_get_code

    block = Block().cuda()
    args = (randn(*shape).cuda(), randn(*shape, seed=5).cuda())
    compiled = torch.compile(block, fullgraph=True)
    result, code = run_and_get_code(compiled, *args)
    torch.testing.assert_close(result, block(*args))
    for kernel in kernels:
        assert kernel in "\n".join(code), kernel
