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
    op_types,
    optimize_checked,
    run_onnx,
)
from lookup_models import FEATURES, StackedLookups, ids_for

import graphopt
from graphopt.analysis import format_graph
from graphopt.frontends.onnx import from_onnx
from graphopt.frontends.torch_export import from_exported_program
from graphopt.fused.embedding_lookups import EMBEDDING_LOOKUPS
from graphopt.ir import Op
from graphopt.ir.ops import VIEWS
from models.embeddings import EmbeddingStack, example_indices, vocab_sizes

RULE = "batch_embedding_lookups"
ONLY_LOOKUPS = [RULE, "remove_dead_nodes"]
PATHS = (*ONNX_PATHS, "torch.export")


class ReadElsewhere(StackedLookups):
    def forward(self, *ids):
        looked = [torch.tanh(table(i)) for table, i in zip(self.tables, ids, strict=True)]
        return torch.stack(looked), self.tables[0](ids[0]) * 2


class MixedWidths(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Embedding(10, 8), torch.nn.Embedding(12, 4)

    def forward(self, i, j):
        return torch.cat([torch.tanh(self.a(i)), torch.tanh(self.b(j))], dim=-1)


class TableAsInput(torch.nn.Module):
    def forward(self, ids_a, ids_b, table_a, table_b):
        a = torch.nn.functional.embedding(ids_a, table_a)
        b = torch.nn.functional.embedding(ids_b, table_b)
        return torch.stack([torch.tanh(a), torch.tanh(b)])


def _optimize(module, args, path, **options):
    if path == "torch.export":
        return optimize_checked_program(torch.export.export(module.eval(), args), **options)
    return optimize_checked(export_onnx(module, args, path), **options)


def optimize_checked_program(program, **options):
    optimized, report = graphopt.optimize(program, check_each_pass=True, **options)
    assert report.verification["ok"], report.verification["summary"]
    return optimized, report


def _lookups(optimized) -> list[str]:
    """The lookups of an optimized model: ONNX Gathers and EmbeddingLookups, torch's lookups."""
    if isinstance(optimized, onnx.ModelProto):
        return [n.input[0] for n in optimized.graph.node if n.op_type in ("Gather", "EmbeddingLookups")]
    targets = [str(n.target) for n in optimized.graph.nodes if n.op == "call_function"]
    return [t for t in targets if "embedding" in t or "index_select" in t]


def printed_ir(optimized) -> list[str]:
    """The optimized model read back into graphopt's IR and printed: one node a line."""
    graph = (
        from_onnx(optimized) if isinstance(optimized, onnx.ModelProto) else from_exported_program(optimized)
    )
    return format_graph(graph).splitlines()


def kernels(optimized) -> list[str]:
    """The ops of the optimized model that launch a kernel (views move nothing), in order."""
    graph = (
        from_onnx(optimized) if isinstance(optimized, onnx.ModelProto) else from_exported_program(optimized)
    )
    return [node.op for node in graph if node.op not in VIEWS]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("n", [6, pytest.param(128, marks=pytest.mark.slow)])
def test_model_a_is_the_indices_stack_one_lookup_and_one_fused_kernel(path, n):
    """The acceptance: at most three kernels (the indices' stack, one lookup, one fused kernel)."""
    module, args = EmbeddingStack(n=n, d=16), example_indices(n, batch=8)
    optimized, report = _optimize(module, args, path)
    assert report.rule_counts[RULE] == 1
    assert kernels(optimized) == [Op.CONCAT, EMBEDDING_LOOKUPS.ir_op, Op.NORM_ACT_LINEAR]
    lines = printed_ir(optimized)
    # (the one concatenation joins the indices, never the tables: those were joined once, at optimize time)
    concat = next(line for line in lines if f"= {Op.CONCAT}(" in line)
    assert concat.endswith(f": int64[{8 * n}]")
    lookup = next(line for line in lines if f"= {EMBEDDING_LOOKUPS.ir_op}(" in line)
    wrap = int(path != "torch.export")  # (ONNX Gather wraps negative indices; aten.embedding rejects them)
    assert lookup.endswith(f"{{wrap_negative={wrap}}}  : float32[{n},8,16]")


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_concatenated_table_is_the_only_copy(path):
    rows = vocab_sizes(FEATURES)
    module = StackedLookups(rows)
    model = export_onnx(module, ids_for(rows), path)
    before = sum(t.ByteSize() for t in model.graph.initializer)
    optimized, _ = optimize_checked(model, only=ONLY_LOOKUPS)
    tables = [t for t in optimized.graph.initializer if len(t.dims) == 2 and t.dims[1] == 8]
    assert [tuple(t.dims) for t in tables] == [(sum(rows), 8)]
    assert [n.input[0] for n in optimized.graph.node if n.op_type == "EmbeddingLookups"] == [tables[0].name]
    assert not {t.name for t in model.graph.initializer if len(t.dims) == 2} & {
        t.name for t in optimized.graph.initializer
    }
    table_bytes = sum(t.ByteSize() for t in tables)
    assert table_bytes == pytest.approx(before, rel=0.01)


@pytest.mark.parametrize("path", PATHS)
def test_per_feature_norms_batch_and_match_the_original(path):
    module, args = EmbeddingStack(n=8, d=8, shared_norm=False), example_indices(8, batch=5)
    optimized, report = _optimize(module, args, path)
    assert report.rule_counts[RULE] == 1 and report.rule_counts["batch_split_chains"] == 1
    assert len(_lookups(optimized)) == 1


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("widths", "differs from chain 0"),
        ("index_types", "differ in dtype or shape"),
        ("read_elsewhere", "also read"),
        ("few", "2 lookups: batched, about 2 kernels would replace 2"),
    ],
)
def test_declines_with_a_reason(case, reason):
    if case == "widths":
        module, args = MixedWidths(), ids_for([10, 12])
    elif case == "index_types":
        module, args = StackedLookups([10, 12]), (ids_for([10])[0], ids_for([12])[0].to(torch.int32))
        module.forward = lambda *ids: torch.stack(
            [torch.tanh(t(i)) for t, i in zip(module.tables, ids, strict=True)]
        )
    elif case == "few":  # (the indices' stack and the one lookup: two kernels for two)
        module, args = StackedLookups([10, 12]), ids_for([10, 12])
    else:
        module, args = ReadElsewhere([10, 12]), ids_for([10, 12])
    model = export_onnx(module, args, "dynamo")
    optimized, report = optimize_checked(model)
    assert RULE not in report.rule_counts
    misses = near_misses(report, RULE)
    if case == "widths":  # chains of different shapes are not one group: nothing to report
        assert op_types(optimized).count("Gather") == 2
    else:
        assert any(reason in m for m in misses), misses


def test_table_that_is_not_a_constant_is_left_alone():
    args = (*ids_for([10, 12]), torch.randn(10, 4), torch.randn(12, 4))
    model = export_onnx(TableAsInput(), args, "dynamo")
    optimized, report = optimize_checked(model)
    assert RULE not in report.rule_counts and not near_misses(report, RULE)
    assert op_types(optimized).count("Gather") == 2


class SharedTables(torch.nn.Module):
    """Features read two tables in turn: each is stored once in the concatenation."""

    def __init__(self):
        super().__init__()
        self.t, self.u = torch.nn.Embedding(20, 8), torch.nn.Embedding(30, 8)

    def forward(self, *ids):
        return torch.stack([torch.tanh((self.u if k % 2 else self.t)(i)) for k, i in enumerate(ids)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("path", ONNX_PATHS)
def test_a_table_read_twice_is_stored_once(path, dtype):
    ids = ids_for([20] * 8, batch=5)
    module = SharedTables().to(dtype).eval()
    model = export_onnx(module, ids, path)
    optimized, report = optimize_checked(model, only=ONLY_LOOKUPS)
    assert report.rule_counts[RULE] == 1
    assert [tuple(t.dims) for t in optimized.graph.initializer if len(t.dims) == 2 and t.dims[1] == 8] == [
        (50, 8)
    ]
    expected = run_onnx(model, feeds_for(model, ids))[0]
    np.testing.assert_array_equal(run_onnx(optimized, feeds_for(optimized, ids))[0], expected)


class SixFeatures(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = EmbeddingStack(n=6, d=8)

    def forward(self, a, b, c, d, e, f):
        return self.model(a, b, c, d, e, f)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_symbolic_batch(path):
    module = SixFeatures().eval()
    model = export_onnx(module, example_indices(6, batch=6), path, dynamic_shapes=[(0,)] * 6)
    optimized, report = optimize_checked(model)
    assert report.rule_counts[RULE] == 1 and op_types(optimized) == [
        "Concat",
        "Reshape",
        "EmbeddingLookups",
        "NormActLinear",
    ]
    ids = example_indices(6, batch=9, seed=3)
    (expected,) = float64_reference(module, ids)
    np.testing.assert_allclose(
        run_onnx(optimized, feeds_for(optimized, ids))[0], expected, rtol=1e-5, atol=1e-5
    )


def test_torch_keeps_the_concatenated_table_a_parameter_named_after_the_tables():
    module, args = EmbeddingStack(n=8, d=8), example_indices(8, batch=5)
    optimized, report = _optimize(module, args, "torch.export")
    assert report.rule_counts[RULE] == 1
    tables = {k: tuple(v.shape) for k, v in optimized.state_dict.items() if k.startswith("tables")}
    assert tables == {"tables.0_to_7.weight": (sum(vocab_sizes(8)), 8)}


def test_memory_is_the_original_tables_and_no_call_concatenates_them():
    """Measured: the optimized program holds the original's state bytes (the tables once, concatenated
    at optimize time) plus a feature's offset and size each, and a call allocates what the original's
    does (its rows and output), nothing of a table's size."""
    from torch.profiler import ProfilerActivity, profile

    module, args = (
        EmbeddingStack(n=8, d=16, smallest_vocab=1000).eval(),
        example_indices(8, 4, smallest_vocab=1000),
    )
    optimized, _ = _optimize(module, args, "torch.export")

    def nbytes(tensors):
        return sum(t.numel() * t.element_size() for t in tensors)

    held = nbytes(optimized.state_dict.values()) + nbytes(optimized.constants.values())
    assert held == nbytes(module.state_dict().values()) + 2 * 8 * 8
    allocated = {}
    for name, call in (("original", module), ("optimized", optimized.module())):
        with torch.no_grad():
            call(*args)
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiled:
                call(*args)
        allocated[name] = sum(e.cpu_memory_usage for e in profiled.events() if e.cpu_memory_usage > 0)
    tables = nbytes(table.weight for table in module.tables)
    assert 0 < allocated["optimized"] <= allocated["original"] < tables / 20, (allocated, tables)
