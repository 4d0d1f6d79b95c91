import numpy as np
import pytest
import torch
from exporting import (
    ONNX_PATHS,
    export_onnx,
    float64_reference,
    near_misses,
    op_types,
    optimize_checked,
    run_onnx,
)

import graphopt

BATCH_PASSES = ["batch_split_chains", "batch_parallel_chains"]
LATER_FUSIONS = ["fuse_norm_act", "fuse_norm_act_linear", "fuse_batch_norm_act", "fuse_bias_act"]
PER_SLICE_OPS = {"Split", "Slice", "Gather", "Concat", "Unsqueeze", "Squeeze"}


class SplitStack(torch.nn.Module):
    """The seed: split a flat tensor into N slices, view, layer norm, tanh, stack, linear, relu."""

    def __init__(self, n, b, d):
        super().__init__()
        self.n, self.b, self.d = n, b, d
        self.linear = torch.nn.Linear(d, 1)

    def forward(self, x):
        pieces = [
            torch.tanh(torch.nn.functional.layer_norm(p.view(self.b, self.d), (self.d,), eps=0.0))
            for p in torch.split(x, self.b * self.d)
        ]
        return torch.relu(self.linear(torch.stack(pieces)))


class PerSliceAffine(torch.nn.Module):
    def __init__(self, n, d, act=torch.tanh, axis=0):
        super().__init__()
        self.n, self.d, self.act, self.axis = n, d, act, axis
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(n))
        for norm in self.norms:
            torch.nn.init.normal_(norm.weight)
            torch.nn.init.normal_(norm.bias)

    def forward(self, x):
        pieces = torch.split(x, self.d, dim=-1)
        return torch.stack(
            [self.act(norm(p)) for norm, p in zip(self.norms, pieces, strict=True)], dim=self.axis
        )


class PerSliceLinear(torch.nn.Module):
    def __init__(self, n, d, k, shared=False, combine="stack"):
        super().__init__()
        self.n, self.d, self.combine = n, d, combine
        count = 1 if shared else n
        self.linears = torch.nn.ModuleList(torch.nn.Linear(d, k) for _ in range(count))

    def forward(self, x):
        pieces = torch.chunk(x, self.n, dim=0)
        outs = [torch.relu(self.linears[i % len(self.linears)](p)) for i, p in enumerate(pieces)]
        return torch.stack(outs) if self.combine == "stack" else torch.cat(outs, dim=-1)


class RmsSilu(torch.nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.n, self.d = n, d
        self.scale = torch.nn.Parameter(torch.rand(n, d) + 0.5)

    def forward(self, x):
        pieces = torch.split(x, self.d, dim=1)
        outs = []
        for i, p in enumerate(pieces):
            rms = p * torch.rsqrt((p * p).mean(-1, keepdim=True) + 1e-6) * self.scale[i]
            outs.append(torch.nn.functional.silu(rms))
        return torch.stack(outs, dim=1)


class Unbound(torch.nn.Module):
    def forward(self, x):
        return torch.stack(
            [
                torch.nn.functional.gelu(torch.nn.functional.layer_norm(p, (p.shape[-1],)))
                for p in torch.unbind(x, 0)
            ]
        )


class Sliced(torch.nn.Module):
    def __init__(self, n, d, offset=0):
        super().__init__()
        self.n, self.d, self.offset = n, d, offset

    def forward(self, x):
        o, d = self.offset, self.d
        return torch.stack(
            [torch.sigmoid(x[:, o + i * d : o + (i + 1) * d] * 2.0 + 1.0) for i in range(self.n)], dim=-1
        )


class Gathered(torch.nn.Module):
    def forward(self, x):
        return torch.stack([torch.tanh(x[i]) * 3.0 for i in range(x.shape[0])])


class CatLastAxis(torch.nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.n, self.d = n, d

    def forward(self, x):
        return torch.cat(
            [
                torch.relu(torch.nn.functional.layer_norm(p, (self.d,)))
                for p in torch.split(x, self.d, dim=-1)
            ],
            dim=-1,
        )


def seed(n, b=8, d=16):
    return SplitStack(n, b, d), (torch.randn(n * b * d),)


POSITIVE = {
    "seed_n2": lambda: seed(2),
    "seed_n16": lambda: seed(16),
    "seed_n512": lambda: seed(512, b=2, d=8),
    "per_slice_affine_stack0": lambda: (PerSliceAffine(5, 8), (torch.randn(3, 40),)),
    "per_slice_affine_stack_last": lambda: (PerSliceAffine(4, 8, axis=-1), (torch.randn(3, 32),)),
    "per_slice_affine_gelu_axis1": lambda: (
        PerSliceAffine(3, 8, torch.nn.functional.gelu, axis=1),
        (torch.randn(2, 5, 24),),
    ),
    "per_slice_linear": lambda: (PerSliceLinear(4, 8, 6), (torch.randn(12, 8),)),
    "shared_linear_cat": lambda: (PerSliceLinear(4, 8, 6, shared=True, combine="cat"), (torch.randn(12, 8),)),
    "rms_silu_axis1": lambda: (RmsSilu(6, 8), (torch.randn(4, 48),)),
    "unbind": lambda: (Unbound(), (torch.randn(5, 3, 8),)),
    "slices": lambda: (Sliced(4, 6), (torch.randn(3, 24),)),
    "partial_slices": lambda: (Sliced(3, 4, offset=2), (torch.randn(3, 20),)),
    "gathers": lambda: (Gathered(), (torch.randn(6, 4, 5),)),
    "cat_last_axis": lambda: (CatLastAxis(4, 8), (torch.randn(5, 32),)),
}


# The dynamo exporter takes minutes on 512 slices; the TorchScript path covers that size.
CASES = [
    (case, path)
    for case in sorted(POSITIVE)
    for path in ONNX_PATHS
    if (case, path) != ("seed_n512", "dynamo")
]


@pytest.mark.parametrize(("case", "path"), CASES)
def test_chains_batch_into_one_chain(case, path):
    module, args = POSITIVE[case]()
    model = export_onnx(module, args, path)
    optimized, report = optimize_checked(model, skip=LATER_FUSIONS)
    assert report.rule_counts.get("batch_split_chains") == 1, near_misses(report, "batch_split_chains")
    assert not PER_SLICE_OPS & set(op_types(optimized)) - {"Slice"} or case == "partial_slices"
    assert op_types(optimized).count("Slice") <= (1 if case == "partial_slices" else 0)
    (expected,) = float64_reference(module, args)
    (actual,) = run_onnx(optimized, {optimized.graph.input[0].name: args[0].numpy()})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_seed_becomes_one_reshape_and_one_chain(path):
    module, args = seed(16)
    optimized, _ = optimize_checked(export_onnx(module, args, path), skip=LATER_FUSIONS)
    compute = [t for t in op_types(optimized) if t != "Constant"]
    assert compute == ["Reshape", "LayerNormalization", "Tanh", "MatMul", "Add", "Relu"]


def test_dynamic_batch_dimension():
    module = PerSliceAffine(4, 8, axis=1)
    args = (torch.randn(3, 32),)
    model = export_onnx(module, args, "torchscript", dynamic_shapes=[(0,)])
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    optimized, report = optimize_checked(model, skip=LATER_FUSIONS, input_shapes={"input_0": [7, 32]})
    assert report.rule_counts.get("batch_split_chains") == 1
    x = torch.randn(11, 32)
    (expected,) = float64_reference(module, (x,))
    (actual,) = run_onnx(optimized, {"input_0": x.numpy()})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


class Mismatched(torch.nn.Module):
    def __init__(self, variant):
        super().__init__()
        self.variant = variant

    def forward(self, x):
        sizes = [8, 16, 8] if self.variant == "widths" else [8, 8, 8]
        pieces = list(torch.split(x, sizes, dim=-1))
        outs = []
        for i, p in enumerate(pieces):
            eps = 1e-3 if self.variant == "eps" and i == 1 else 1e-5
            h = torch.nn.functional.layer_norm(p, (p.shape[-1],), eps=eps)
            act = torch.relu if self.variant == "activation" and i == 2 else torch.tanh
            outs.append(act(h))
        if self.variant == "widths":
            return torch.cat(outs, dim=-1)
        if self.variant == "order":
            return torch.stack([outs[1], outs[0], outs[2]])
        if self.variant == "twice":
            return torch.stack([outs[0], outs[0], outs[1], outs[2]])
        if self.variant == "intermediate":
            return torch.stack(outs), outs[1] * 2.0
        if self.variant == "subset":
            return torch.stack(outs[:2]), outs[2]
        return torch.stack(outs)


NEGATIVE = {
    "widths": "piece widths differ",
    "activation": "differs from chain 0 in the op",
    "eps": "differs from chain 0 in the attributes",
    "order": "combined out of order",
    "twice": "used by more than one chain",
    "intermediate": "is also read",
    "subset": "2 of the 3 pieces",
}


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("variant", sorted(NEGATIVE))
def test_mismatched_chains_stay_exactly_as_they_were(variant, path):
    model = export_onnx(Mismatched(variant), (torch.randn(4, 24 if variant != "widths" else 32),), path)
    untouched, _ = optimize_checked(model, skip=BATCH_PASSES)
    optimized, report = optimize_checked(model)
    assert "batch_split_chains" not in report.rule_counts
    assert optimized.SerializeToString() == untouched.SerializeToString()
    reasons = near_misses(report, "batch_split_chains")
    assert any(NEGATIVE[variant] in r for r in reasons), reasons


def test_training_mode_dropout_stays():
    class Dropped(torch.nn.Module):
        def forward(self, x):
            return torch.stack(
                [
                    torch.nn.functional.dropout(torch.tanh(p), 0.5, training=True)
                    for p in torch.split(x, 4, dim=-1)
                ]
            )

    model = export_onnx(Dropped(), (torch.randn(3, 12),), "torchscript")
    optimized, report = graphopt.optimize(model, verify=False)
    assert "batch_split_chains" not in report.rule_counts
    assert op_types(optimized).count("Tanh") == 3
