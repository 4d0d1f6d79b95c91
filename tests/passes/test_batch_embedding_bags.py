import numpy as np
import onnx
import pytest
import torch
from exporting import (
    ONNX_PATHS,
    export_onnx,
    feeds_for,
    float64_reference,
    near_misses,
    optimize_checked,
    run_onnx,
)
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

import graphopt
from models.embeddings import Dlrm, EmbeddingStack, dlrm_inputs, example_indices, vocab_sizes

RULE = "batch_embedding_bags"
PATHS = (*ONNX_PATHS, "torch.export")
N = 8  # features: enough that one pooled lookup saves launches
WEIGHTED_N = 12  # (weights add a stack to the batched form)
VARIANTS = [("sum", False), ("mean", False), ("sum", True)]


class HandPooled(torch.nn.Module):
    """The DLRM front written with nn.Embedding: emb(ids).sum(1), stacked with a dense vector."""

    def __init__(self, n=N, d=4):
        super().__init__()
        self.tables = torch.nn.ModuleList(torch.nn.Embedding(r, d) for r in vocab_sizes(n))

    def forward(self, dense, *ids):
        pooled = [table(i).sum(1) for table, i in zip(self.tables, ids, strict=True)]
        return torch.stack([dense, *pooled], dim=1)


def _optimize(module, args, path, **options):
    if path == "torch.export":
        optimized, report = graphopt.optimize(
            torch.export.export(module, args), check_each_pass=True, **options
        )
        assert report.verification["ok"], report.verification["summary"]
        return optimized, report
    return optimize_checked(export_onnx(module, args, path), **options)


def _run(optimized, args):
    if isinstance(optimized, onnx.ModelProto):
        return run_onnx(optimized, feeds_for(optimized, args))[0]
    with torch.no_grad():
        return optimized.module()(*args).numpy()


def _lookups(optimized) -> int:
    """Table lookups left: ONNX Gathers and Loops on 2-D tables; torch embedding calls."""
    if isinstance(optimized, onnx.ModelProto):
        tables = {t.name for t in optimized.graph.initializer if len(t.dims) == 2 and t.dims[0] >= 50}
        gathers = [n for n in optimized.graph.node if n.op_type == "Gather" and n.input[0] in tables]
        return len(gathers) + sum(n.op_type == "Loop" for n in optimized.graph.node)
    targets = [str(n.target) for n in optimized.graph.nodes if n.op == "call_function"]
    return sum("embedding" in t for t in targets)


def _fresh(n, batch, bag, weighted, seed):
    """Random ids with the edge cases: each table's last row, a row repeated within a bag."""
    generator = torch.Generator().manual_seed(seed)
    dense = torch.randn(batch, 13, generator=generator)
    ids = []
    for rows in vocab_sizes(n):
        block = torch.randint(0, rows, (batch, bag), generator=generator)
        block[0, :] = rows - 1
        block[1, 1] = block[1, 0]
        ids.append(block)
    weights = [torch.rand(batch, bag, generator=generator) for _ in range(n)] if weighted else []
    return (dense, *ids, *weights)


@pytest.mark.parametrize(("mode", "weighted"), VARIANTS)
@pytest.mark.parametrize("path", PATHS)
def test_dlrm_pools_every_feature_in_one_lookup(path, mode, weighted):
    n = WEIGHTED_N if weighted else N
    module = Dlrm(n=n, d=4, mode=mode, weighted=weighted).eval()
    args = dlrm_inputs(n, batch=5, weighted=weighted)
    optimized, report = _optimize(module, args, path)
    assert report.rule_counts[RULE] == 1
    assert _lookups(optimized) == 1
    fresh = _fresh(n, 5, 4, weighted, seed=7)
    (expected,) = float64_reference(module, fresh)
    np.testing.assert_allclose(_run(optimized, fresh), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", PATHS)
def test_hand_written_sum_is_pooled_too(path):
    module, args = HandPooled().eval(), _fresh(N, 6, 3, False, seed=3)[: N + 1]
    args = (args[0][:, :4], *args[1:])
    optimized, report = _optimize(module, args, path)
    assert report.rule_counts[RULE] == 1 and _lookups(optimized) == 1
    (expected,) = float64_reference(module, args)
    np.testing.assert_allclose(_run(optimized, args), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_out_of_range_index_fails_in_onnx_runtime_as_in_the_original(path):
    module, args = Dlrm(n=N, d=4).eval(), dlrm_inputs(N, batch=5)
    model = export_onnx(module, args, path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts[RULE] == 1
    rows = vocab_sizes(N)
    bad = list(args)
    bad[2] = bad[2].clone()
    bad[2][3, 1] = rows[1]  # a neighbour's first row once offset
    for graph in (model, optimized):
        with pytest.raises(InvalidArgument, match="out of data bounds"):
            run_onnx(graph, feeds_for(graph, tuple(bad)))


@pytest.mark.parametrize("value", ["past_own_table", "negative"])
def test_out_of_range_index_fails_in_torch_as_in_the_original(value):
    module, args = Dlrm(n=N, d=4).eval(), dlrm_inputs(N, batch=5)
    program = torch.export.export(module, args)
    optimized, report = _optimize(module, args, "torch.export")
    assert report.rule_counts[RULE] == 1
    bad = list(args)
    bad[2] = bad[2].clone()
    bad[2][3, 1] = vocab_sizes(N)[1] if value == "past_own_table" else -1
    for run in (module, program.module(), optimized.module()):  # (torch's embedding_bag bounds check on CPU)
        with pytest.raises(RuntimeError, match="Expected i < index_size"):
            run(*bad)


def test_negative_indices_read_from_the_end_in_onnx_as_in_the_original():
    module, args = Dlrm(n=N, d=4).eval(), dlrm_inputs(N, batch=5)
    model = export_onnx(module, args, "dynamo")
    optimized, _ = optimize_checked(model)
    wrapped = [a.clone() for a in args]
    for block, rows in zip(wrapped[1:], vocab_sizes(N), strict=True):
        block[2, :] = torch.tensor([-1, -rows, 0, rows - 1])
    expected = run_onnx(model, feeds_for(model, tuple(wrapped)))[0]
    np.testing.assert_allclose(
        run_onnx(optimized, feeds_for(optimized, tuple(wrapped)))[0], expected, rtol=1e-6
    )


@pytest.mark.parametrize("path", PATHS)
def test_few_cheap_bags_stay_as_they_are(path):
    """Three torch embedding_bag calls (or three Gather + ReduceSum) cost less than the index arithmetic."""
    if path == "torch.export":
        module, args = Dlrm(n=3, d=4).eval(), dlrm_inputs(3, batch=5)
    else:
        module, args = HandPooled(n=3).eval(), _fresh(3, 5, 2, False, seed=1)
        args = (args[0][:, :4], *args[1:])
    optimized, report = _optimize(module, args, path)
    assert RULE not in report.rule_counts
    assert any("kernels would replace" in m for m in near_misses(report, RULE))
    assert _lookups(optimized) == 3


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_three_exported_bag_loops_are_pooled(path):
    """The exporters' Loop runs one iteration per bag: even three of them are worth one lookup."""
    module, args = Dlrm(n=3, d=4).eval(), dlrm_inputs(3, batch=5)
    optimized, report = _optimize(module, args, path)
    assert report.rule_counts[RULE] == 1 and _lookups(optimized) == 1


def test_concatenated_table_is_the_only_copy():
    module, args = Dlrm(n=N, d=4).eval(), dlrm_inputs(N, batch=5)
    model = export_onnx(module, args, "dynamo")
    optimized, _ = optimize_checked(model)
    tables = [tuple(t.dims) for t in optimized.graph.initializer if len(t.dims) == 2 and t.dims[1] == 4]
    assert (sum(vocab_sizes(N)), 4) in tables
    assert not [d for d in tables if d[0] in vocab_sizes(N)]


# (bags of different sizes, nn.EmbeddingBag with offsets: test_batch_jagged_bags.py)


def test_torch_keeps_the_concatenated_table_a_parameter_named_after_the_tables():
    module, args = Dlrm(n=N, d=4).eval(), dlrm_inputs(N, batch=5)
    optimized, _ = _optimize(module, args, "torch.export")
    tables = {k: tuple(v.shape) for k, v in optimized.state_dict.items() if k.startswith("bags")}
    assert tables == {f"bags.0_to_{N - 1}.weight": (sum(vocab_sizes(N)), 4)}


@pytest.mark.parametrize("path", ["torchscript", "torch.export"])
def test_bags_feeding_per_feature_chains_become_one_lookup_and_one_fused_kernel(path):
    """Model (a) with nn.EmbeddingBag tables: the bags pool as one, then the chains batch and fuse."""
    module, args = EmbeddingStack(n=N, d=16, bag=3).eval(), example_indices(N, batch=6, bag=3)
    optimized, report = _optimize(module, args, path)
    assert report.rule_counts[RULE] == 1 and report.rule_counts["batch_split_chains"] == 1
    assert _lookups(optimized) == 1
    if path == "torch.export":
        targets = [str(n.target) for n in optimized.graph.nodes if n.op == "call_function"]
        assert targets[-1] == "graphopt.norm_act_linear.default"
    else:
        types = [n.op_type for n in optimized.graph.node]
        assert types[-1] == "NormActLinear" and "LayerNormalization" not in types
    fresh = example_indices(N, batch=6, bag=3, seed=4)
    (expected,) = float64_reference(module, fresh)
    np.testing.assert_allclose(_run(optimized, fresh), expected, rtol=1e-5, atol=1e-5)


def test_bags_of_unknown_shape_feeding_chains_are_left_to_the_chain_passes():
    """The dynamo exporter's bag Loops end in a ConcatFromSequence of unknown rank: the chains typed
    from it cannot be batched exactly, so the bags stay and so do the chains (the near misses say
    why; batching the chains moved the norm's axis -1 to 0, which the numeric check refused)."""
    module, args = EmbeddingStack(n=N, d=16, bag=3).eval(), example_indices(N, batch=6, bag=3)
    model = export_onnx(module, args, "dynamo")
    _, report = optimize_checked(model)
    assert RULE not in report.rule_counts and "batch_parallel_chains" not in report.rule_counts
    assert any("no known [batch, 16] shape" in m for m in near_misses(report, RULE))
    assert any("has no known rank" in m for m in near_misses(report, "batch_parallel_chains"))


class HandWeighted(torch.nn.Module):
    """(emb(ids) * w.unsqueeze(-1)).sum(1) per feature, stacked with a dense vector."""

    def __init__(self, n=WEIGHTED_N):
        super().__init__()
        self.tables = torch.nn.ModuleList(torch.nn.Embedding(r, 4) for r in vocab_sizes(n))

    def forward(self, dense, *ids_and_weights):
        n = len(self.tables)
        ids, weights = ids_and_weights[:n], ids_and_weights[n:]
        pooled = [(t(i) * w.unsqueeze(-1)).sum(1) for t, i, w in zip(self.tables, ids, weights, strict=True)]
        return torch.stack([dense, *pooled], 1)


@pytest.mark.parametrize(("path", "opset"), [("torchscript", 11), ("torchscript", 18), ("dynamo", 18)])
def test_hand_written_weighted_sum_is_pooled_at_old_and_new_opsets(path, opset):
    args = _fresh(WEIGHTED_N, 5, 3, True, seed=2)
    args = (args[0][:, :4], *args[1:])
    module = HandWeighted().eval()
    optimized, report = optimize_checked(export_onnx(module, args, path, opset=opset))
    assert report.rule_counts[RULE] == 1 and _lookups(optimized) == 1
    (expected,) = float64_reference(module, args)
    np.testing.assert_allclose(_run(optimized, args), expected, rtol=1e-6, atol=1e-6)


class NineInputs(torch.nn.Module):
    """HandPooled with named inputs, for per-input dynamic shapes."""

    def __init__(self):
        super().__init__()
        self.model = HandPooled()

    def forward(self, x, a, b, c, d, e, f, g, h):
        return self.model(x, a, b, c, d, e, f, g, h)


def _hand_args(batch, seed):
    args = _fresh(N, batch, 3, False, seed=seed)[: N + 1]
    return (args[0][:, :4], *args[1:])


@pytest.mark.parametrize("path", PATHS)
def test_symbolic_batch(path):
    module = NineInputs().eval()
    if path == "torch.export":
        batch = torch.export.Dim("batch")
        program = torch.export.export(module, _hand_args(6, 3), dynamic_shapes=({0: batch},) * (N + 1))
        optimized, report = graphopt.optimize(program, check_each_pass=True)
        assert report.verification["ok"], report.verification["summary"]
    else:
        model = export_onnx(module, _hand_args(6, 3), path, dynamic_shapes=[(0,)] * (N + 1))
        optimized, report = optimize_checked(model)
    assert report.rule_counts[RULE] == 1 and _lookups(optimized) == 1
    other = _hand_args(9, 5)
    (expected,) = float64_reference(module, other)
    np.testing.assert_allclose(_run(optimized, other), expected, rtol=1e-6, atol=1e-6)
