"""batch_embedding_bags on bags of different sizes: nn.EmbeddingBag on 1-D ids with run-time offsets.

Through all three export paths, N features pool as one jagged_bag (graphopt/analysis/jagged_bag.py) on their
tables concatenated once. Its sums are the original's bit for bit on the CPU: torch runs the same
embedding_bag kernel on each bag's rows in their order, and ONNX Runtime's CPU ScatterND adds a bag's
rows one after another as the Loop's ReduceSum did (its mean divides that sum by the bag's size, as
ReduceMean does), so the tests compare with the original exactly, and with a float64 reference of
the module within float32 rounding of the sums (a bag holds at most a few dozen rows here).
"""

import numpy as np
import onnx
import pytest
import torch
from exporting import ONNX_PATHS, export_onnx, feeds_for, float64_reference, near_misses, run_onnx
from jagged_models import BATCH, FEATURES, JaggedFront, jagged_inputs, weird_offsets
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

import graphopt
from graphopt.analysis import format_graph
from graphopt.frontends.onnx import from_onnx
from graphopt.frontends.torch_export import from_exported_program
from graphopt.ir import Op
from graphopt.pipeline import PIPELINE, run_passes
from models.embeddings import Dlrm, vocab_sizes

RULE = "batch_embedding_bags"
PATHS = (*ONNX_PATHS, "torch.export")
VARIANTS = [("sum", False), ("mean", False), ("sum", True)]


def _optimize(module, args, path, **options):
    """Optimized with the numeric check on: on the given inputs in torch (whose embedding_bag refuses
    the offsets the check would draw at random), on its random draws in ONNX Runtime."""
    if path == "torch.export":
        program = torch.export.export(module.eval(), args, **options.pop("export", {}))
        names = [s.arg.name for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
        feeds = {name: a.numpy() for name, a in zip(names, args, strict=True)}
        optimized, report = graphopt.optimize(program, check_each_pass=True, inputs=feeds, **options)
        return program, optimized, report
    model = export_onnx(module, args, path, **options.pop("export", {}))
    optimized, report = graphopt.optimize(model, check_each_pass=True, **options)
    assert report.verification["ok"], report.verification["summary"]
    return model, optimized, report


def _run(model, args):
    if isinstance(model, onnx.ModelProto):
        return run_onnx(model, feeds_for(model, args))[0]
    with torch.no_grad():
        return model.module()(*args).numpy()


def _pipeline_ir(original) -> list[str]:
    """The original read into graphopt's IR, every pass run, printed: one node a line."""
    graph = from_onnx(original) if isinstance(original, onnx.ModelProto) else from_exported_program(original)
    run_passes(graph, PIPELINE)
    return format_graph(graph).splitlines()


def _bag_calls(model) -> int:
    """The bag lookups left: the exporters' Loops (and pooled ScatterNDs) in ONNX, embedding_bag calls."""
    return sum(op in ("Loop", "ScatterND") or "embedding_bag" in op for op in _lookups(model))


def _lookups(model) -> list[str]:
    """What still looks rows up in the optimized model: Loops, Gathers on the tables and ScatterNDs in
    ONNX; embedding_bag calls in torch."""
    if isinstance(model, onnx.ModelProto):
        tables = {t.name for t in model.graph.initializer if len(t.dims) == 2 and t.dims[0] >= 50}
        return [
            n.op_type
            for n in model.graph.node
            if n.op_type in ("Loop", "ScatterND") or (n.op_type == "Gather" and n.input[0] in tables)
        ]
    return [str(n.target) for n in model.graph.nodes if "embedding" in str(n.target)]


@pytest.mark.parametrize("last_offset", [False, True])
@pytest.mark.parametrize(("mode", "weighted"), VARIANTS)
@pytest.mark.parametrize("path", PATHS)
def test_dlrm_pools_every_feature_in_one_lookup(path, mode, weighted, last_offset):
    n = FEATURES[path]
    module = Dlrm(n=n, d=4, mode=mode, weighted=weighted, jagged=True, last_offset=last_offset).eval()
    original, optimized, report = _optimize(module, jagged_inputs(n, weighted, last_offset, dense=13), path)
    assert report.rule_counts[RULE] == 1
    pooled = [line for line in _pipeline_ir(original) if f"= {Op.JAGGED_BAG}(" in line]
    form = {"torchscript": "onnx_loop", "dynamo": "onnx_sequence", "torch.export": "torch"}[path]
    assert len(pooled) == 1 and f"form='{form}'" in pooled[0] and f"mode='{mode}'" in pooled[0]
    assert pooled[0].endswith(f"  : float32[{n},{BATCH},4]")
    one = ["Gather", "ScatterND"] if path != "torch.export" else ["aten._embedding_bag.default"]
    assert _lookups(optimized) == one
    fresh = jagged_inputs(n, weighted, last_offset, seed=9, dense=13)
    (expected,) = float64_reference(module, fresh)
    np.testing.assert_allclose(_run(optimized, fresh), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("last_offset", [False, True])
@pytest.mark.parametrize(("mode", "weighted"), VARIANTS)
@pytest.mark.parametrize("path", PATHS)
def test_pooled_bags_are_the_originals_bit_for_bit_and_empty_bags_are_zero(path, mode, weighted, last_offset):
    n = FEATURES[path]
    module = JaggedFront(n, mode, last_offset, weighted).eval()
    original, optimized, report = _optimize(module, jagged_inputs(n, weighted, last_offset), path)
    assert report.rule_counts[RULE] == 1
    for seed in (3, 4):
        fresh = jagged_inputs(n, weighted, last_offset, seed=seed)
        got = _run(optimized, fresh)
        np.testing.assert_array_equal(got, _run(original, fresh))
        (expected,) = float64_reference(module, fresh)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        assert not got[0, 1:].any() and not got[BATCH // 2 - 1, 1:].any()  # (the empty bags)


def test_onnx_concatenated_table_is_the_only_copy():
    n = FEATURES["dynamo"]
    _, optimized, _ = _optimize(JaggedFront(n), jagged_inputs(n), "dynamo")
    tables = [tuple(t.dims) for t in optimized.graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
    assert tables == [(sum(vocab_sizes(n)), 4)]


@pytest.mark.parametrize("last_offset", [False, True])
@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("path", ONNX_PATHS)
def test_offsets_outside_torchs_contract_are_read_as_the_exported_loops_read_them(path, mode, last_offset):
    n = FEATURES[path]
    module = JaggedFront(n, mode, last_offset).eval()
    original, optimized, _ = _optimize(module, jagged_inputs(n, last_offset=last_offset), path)
    fresh = list(jagged_inputs(n, last_offset=last_offset, seed=5))
    for k in range(n):
        fresh[1 + n + k] = weird_offsets(len(fresh[1 + k]), last_offset)
    np.testing.assert_array_equal(_run(optimized, tuple(fresh)), _run(original, tuple(fresh)))


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_out_of_range_index_fails_in_onnx_runtime_and_negative_ones_wrap_as_in_the_original(path):
    n = FEATURES[path]
    original, optimized, _ = _optimize(JaggedFront(n), jagged_inputs(n), path)
    bad = list(jagged_inputs(n, seed=6))
    bad[2] = bad[2].clone()
    bad[2][3] = vocab_sizes(n)[1]  # (a neighbour's first row once moved)
    for model in (original, optimized):
        with pytest.raises(InvalidArgument, match="out of data bounds"):
            _run(model, tuple(bad))
    wrapped = list(jagged_inputs(n, seed=6))
    for k, rows in enumerate(vocab_sizes(n)):
        wrapped[1 + k] = wrapped[1 + k].clone()
        wrapped[1 + k][:3] = torch.tensor([-1, -rows, rows - 1])
    np.testing.assert_array_equal(_run(optimized, tuple(wrapped)), _run(original, tuple(wrapped)))


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_an_index_in_no_bag_is_looked_up_only_where_the_original_looked_it_up(path):
    """With a last offset short of the end, the ids after it are in no bag: the TorchScript Loop never
    looks them up, dynamo's graph looks every id up first (an error for one out of range)."""
    n = FEATURES[path]
    original, optimized, _ = _optimize(
        JaggedFront(n, last_offset=True), jagged_inputs(n, last_offset=True), path
    )
    bad = list(jagged_inputs(n, last_offset=True, seed=7))
    count = len(bad[1])
    bad[1], bad[1 + n] = bad[1].clone(), torch.tensor([0, 1, 2, 3, 4, count - 2])
    bad[1][-1] = 10**6
    if path == "torchscript":
        np.testing.assert_array_equal(_run(optimized, tuple(bad)), _run(original, tuple(bad)))
        return
    for model in (original, optimized):
        with pytest.raises(InvalidArgument, match="out of data bounds"):
            _run(model, tuple(bad))


@pytest.mark.parametrize("value", ["past_own_table", "negative"])
def test_out_of_range_index_fails_in_torch_as_in_the_original(value):
    n = FEATURES["torch.export"]
    module = JaggedFront(n).eval()
    program, optimized, report = _optimize(module, jagged_inputs(n), "torch.export")
    assert report.rule_counts[RULE] == 1
    bad = list(jagged_inputs(n, seed=6))
    bad[2] = bad[2].clone()
    bad[2][3] = vocab_sizes(n)[1] if value == "past_own_table" else -1
    # (torch's embedding_bag bounds check on the CPU: in the optimized program, the position and value
    # of the index among all features' once moved, and the rows of the concatenated table)
    check = "which is not in the valid range|Expected i < index_size"
    for run in (module, program.module(), optimized.module()):
        with pytest.raises(RuntimeError, match=check):
            run(*bad)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_features_sharing_one_offsets_tensor_are_pooled(path):
    class SharedOffsets(JaggedFront):
        def forward(self, dense, offsets, *ids):
            return super().forward(dense, *ids, *[offsets] * len(ids))

    n = FEATURES[path]
    module = SharedOffsets(n).eval()
    args = jagged_inputs(n)
    args = (args[0], args[1 + n], *args[1 : 1 + n])
    original, optimized, report = _optimize(module, args, path)
    assert report.rule_counts[RULE] == 1
    fresh = jagged_inputs(n, seed=8)
    fresh = (fresh[0], fresh[1 + n], *fresh[1 : 1 + n])
    np.testing.assert_array_equal(_run(optimized, fresh), _run(original, fresh))


class ReadsATable(JaggedFront):
    """Feature 1's table also read by a lookup of its own (at run time: not folded away)."""

    def forward(self, dense, *sparse):
        return super().forward(dense, *sparse) + self.bags[1].weight[sparse[0][:1]]


def _alternating(n, a, b):
    return [a, b] * (n // 2) + [a] * (n % 2)


def _mixed_last_offsets(n, seed):
    """Inputs of features whose include_last_offset alternates (odd features' offsets [B + 1])."""
    args = list(jagged_inputs(n, last_offset=True, seed=seed))
    for k in range(0, n, 2):
        args[1 + n + k] = args[1 + n + k][:-1]
    return tuple(args)


# (the module, its inputs, the near miss's reason or None where the bags are simply not neighbours)
NEAR_MISSES = {
    "different widths": (
        lambda n: JaggedFront(n, dims=_alternating(n, 4, 8), cat_dim=1),
        jagged_inputs,
        "differ",
    ),
    "different dtypes": (
        lambda n: JaggedFront(n, dtypes=_alternating(n, torch.float32, torch.float64)),
        jagged_inputs,
        None,
    ),
    "a table read elsewhere": (ReadsATable, jagged_inputs, "is also read outside its bag"),
    "offsets with and without the last": (
        lambda n: JaggedFront(n, last_offset=_alternating(n, False, True)),
        _mixed_last_offsets,
        "differ",
    ),
}


@pytest.mark.parametrize("case", NEAR_MISSES)
@pytest.mark.parametrize("path", PATHS)
def test_near_misses_leave_the_graph_as_it_was(path, case):
    make, inputs, reason = NEAR_MISSES[case]
    n = FEATURES[path]
    module = make(n).eval()
    _, optimized, report = _optimize(module, inputs(n, seed=1), path)
    assert RULE not in report.rule_counts
    if reason is not None:
        assert any(reason in m for m in near_misses(report, RULE)), near_misses(report, RULE)
    assert _bag_calls(optimized) == n
    fresh = inputs(n, seed=2)
    (expected,) = float64_reference(module, fresh)
    np.testing.assert_allclose(_run(optimized, fresh), expected, rtol=1e-5, atol=1e-6)


def test_features_with_different_numbers_of_bags_stay_as_they_are():
    n = FEATURES["torchscript"]
    args = list(jagged_inputs(n))
    args[2 + n] = args[2 + n][:-1]  # (the middle feature one bag fewer: no two neighbours alike)
    _, optimized, report = _optimize(JaggedFront(n, cat_dim=0), tuple(args), "torchscript")
    assert RULE not in report.rule_counts
    assert any("differ" in m for m in near_misses(report, RULE))
    assert _bag_calls(optimized) == n


def test_torch_pools_no_fewer_than_about_a_dozen_features():
    _, optimized, report = _optimize(JaggedFront(3), jagged_inputs(3), "torch.export")
    assert RULE not in report.rule_counts
    assert any("kernels would replace" in m for m in near_misses(report, RULE))
    assert _bag_calls(optimized) == 3


def test_symbolic_numbers_of_ids_stay_as_they_are():
    n = FEATURES["torch.export"]
    ids = torch.export.Dim("ids", min=2)
    dims = (None, (*({0: ids} for _ in range(n)), *(None for _ in range(n))))  # (dense, *sparse)
    _, optimized, report = _optimize(
        JaggedFront(n), jagged_inputs(n), "torch.export", export={"dynamic_shapes": dims}
    )
    assert RULE not in report.rule_counts
    assert any("of a symbolic length" in m for m in near_misses(report, RULE))
    assert _bag_calls(optimized) == n


def test_opsets_before_16_have_no_scatter_add_and_keep_their_loops():
    n = FEATURES["torchscript"]
    _, optimized, report = _optimize(JaggedFront(n), jagged_inputs(n), "torchscript", export={"opset": 15})
    assert RULE not in report.rule_counts
    assert any("opset 15" in m for m in near_misses(report, RULE))
    assert _bag_calls(optimized) == n


class JaggedEmbeddingStack(JaggedFront):
    """Model (a) with its tables as EmbeddingBags on flat ids and offsets: each pooled feature through
    one LayerNorm and tanh, stacked, Linear(D, 1), ReLU."""

    def __init__(self, n):
        super().__init__(n, dims=[16] * n)
        self.norm, self.linear = torch.nn.LayerNorm(16), torch.nn.Linear(16, 1)

    def forward(self, *sparse):
        n = len(self.bags)
        pairs = zip(self.bags, sparse[:n], sparse[n:], strict=True)
        return torch.relu(self.linear(torch.stack([torch.tanh(self.norm(b(i, o))) for b, i, o in pairs])))


@pytest.mark.parametrize("path", ["torchscript", "torch.export"])
def test_bags_feeding_per_feature_chains_become_one_lookup_and_one_fused_kernel(path):
    n = FEATURES[path]
    module = JaggedEmbeddingStack(n).eval()
    original, optimized, report = _optimize(module, jagged_inputs(n)[1:], path)
    assert report.rule_counts[RULE] == 1 and report.rule_counts["batch_split_chains"] == 1
    nodes = [line.split(" = ")[1] for line in _pipeline_ir(original) if " = " in line]
    ops = [node.split("(")[0] for node in nodes if not node.startswith("constant")]
    assert ops == [Op.JAGGED_BAG, Op.NORM_ACT_LINEAR]
    fresh = jagged_inputs(n, seed=4)[1:]
    (expected,) = float64_reference(module, fresh)
    np.testing.assert_allclose(_run(optimized, fresh), expected, rtol=1e-5, atol=1e-5)
