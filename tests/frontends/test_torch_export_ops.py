import warnings

import pytest
import torch
import torch_programs as tp
from torch import nn
from torch.export.graph_signature import InputKind

import graphopt
from graphopt.analysis import op_counts, verify
from graphopt.frontends.torch_export import call_arguments, from_exported_program, user_input_names
from graphopt.ir import DType, Op, constant_of


def _export(module: nn.Module, *inputs, dynamic_shapes=None, decompose=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(module.eval(), inputs, dynamic_shapes=dynamic_shapes)
        return program.run_decompositions() if decompose else program


def _graph(module: nn.Module, *inputs, **options):
    graph = from_exported_program(_export(module, *inputs, **options))
    verify(graph)
    return graph


class _Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def test_linear_layer_norm_gelu_map_to_canonical_ops():
    counts = op_counts(from_exported_program(tp.program("mlp_ln_gelu", "exported")))
    assert counts == {Op.LINEAR: 2, Op.LAYER_NORM: 1, Op.GELU: 1}
    graph = from_exported_program(tp.program("mlp_ln_gelu", "exported"))
    (gelu,) = graph.nodes_of(Op.GELU)
    assert gelu.attrs == {"approximate": "tanh"}
    (norm,) = graph.nodes_of(Op.LAYER_NORM)
    assert norm.attrs == {"axis": 2, "eps": 1e-5}
    assert [v.name for v in norm.inputs[1:]] == ["p_1_weight", "p_1_bias"]


def test_decomposed_linear_is_transpose_matmul_add_and_native_layer_norm_is_layer_norm():
    graph = from_exported_program(tp.program("split_stack", "decomposed"))
    counts = op_counts(graph)
    assert counts[Op.LAYER_NORM] == 4 and counts[Op.SPLIT] == 1
    assert counts[Op.TRANSPOSE] == 1 and counts[Op.MATMUL] == 1 and counts[Op.ADD] == 1
    (add,) = graph.nodes_of(Op.ADD)
    assert add.input(0).producer.op == Op.MATMUL
    assert add.input(1).name == "p_linear_bias"
    assert not any(":" in op for op in counts)


def test_native_layer_norm_whose_statistics_are_read_stays_verbatim():
    def fn(x, w):
        y, mean, rstd = torch.native_layer_norm(x, [8], w, None, 1e-5)
        return y + mean * rstd

    graph = _graph(_Lambda(fn), torch.randn(2, 8), torch.ones(8))
    assert Op.LAYER_NORM not in op_counts(graph)
    (node,) = graph.nodes_of("aten:native_layer_norm.default")
    assert len(node.outputs) == 3


def test_python_numbers_become_zero_dim_constants_of_the_tensor_dtype():
    graph = _graph(_Lambda(lambda x: (x * 0.5 + 1) - 2 * x), torch.randn(3).half())
    for node in graph.nodes_of([Op.MUL, Op.ADD, Op.SUB]):
        assert all(v.dtype == DType.FLOAT16 for v in node.inputs)
    scalars = sorted(constant_of(v).scalar() for v in graph.constants.values())
    assert scalars == [0.5, 1.0, 2.0]
    assert all(constant_of(v).shape == () for v in graph.constants.values())


VERBATIM = {
    "int_plus_float": (lambda x: x + 0.5, lambda: torch.arange(3), "aten:add.Tensor"),
    "add_with_alpha": (lambda x: torch.add(x, x, alpha=2), lambda: torch.randn(3), "aten:add.Tensor"),
    "squeeze_of_a_dim_not_1": (lambda x: x.squeeze(1), lambda: torch.randn(2, 3), "aten:squeeze.dim"),
    "view_with_a_literal_0": (lambda x: x.view(0, 2, 4), lambda: torch.randn(0, 8), "aten:view.default"),
}


@pytest.mark.parametrize("case", VERBATIM, ids=str)
def test_calls_without_an_exact_canonical_meaning_stay_verbatim(case):
    fn, make_input, kept = VERBATIM[case]
    counts = op_counts(_graph(_Lambda(fn), make_input()))
    assert kept in counts
    assert all(":" in op for op in counts)


def test_views_sized_by_symbolic_dims_stay_verbatim_and_dims_keep_their_names():
    batch = torch.export.Dim("batch", min=2)
    graph = _graph(nn.Linear(8, 4), torch.randn(3, 5, 8), dynamic_shapes=({0: batch},), decompose=True)
    (x,) = graph.inputs
    assert isinstance(x.shape[0], str) and x.shape[1:] == (5, 8)
    views = graph.nodes_of("aten:view.default")
    assert len(views) == 2
    assert graph.outputs[0].shape == (x.shape[0], 5, 4)


def test_chunk_and_unbind_become_splits_with_explicit_sizes():
    def fn(x):
        a, b, c = x.chunk(3, dim=-1)
        rows = x.unbind(0)
        return a * 2, b + c.sum(), rows[1]

    graph = _graph(_Lambda(fn), torch.randn(2, 8))
    sizes = sorted(n.attrs["sizes"] for n in graph.nodes_of(Op.SPLIT))
    assert sizes == [(1, 1), (3, 3, 2)]
    squeezes = graph.nodes_of(Op.SQUEEZE)
    assert len(squeezes) == 2 and all(n.attrs["axes"] == (0,) for n in squeezes)


def test_axes_are_non_negative_when_read():
    def fn(x):
        return torch.stack([x, x], dim=-1).mean(dim=-1), torch.cat([x, x], dim=-1).unsqueeze(-1)

    graph = _graph(_Lambda(fn), torch.randn(2, 3))
    assert graph.nodes_of(Op.STACK)[0].attrs == {"axis": 2}
    assert graph.nodes_of(Op.REDUCE_MEAN)[0].attrs == {"axes": (2,), "keepdims": False}
    assert graph.nodes_of(Op.CONCAT)[0].attrs == {"axis": 1}
    assert graph.nodes_of(Op.UNSQUEEZE)[0].attrs == {"axes": (2,)}


def test_assertions_without_readers_survive_dead_code_removal():
    graph = from_exported_program(tp.program("misc_ops", "exported"))
    (check,) = graph.nodes_of(Op.ASSERT_METADATA)
    assert check.meta["side_effects"]
    graph.remove_dead()
    assert check in graph


def test_non_tensor_inputs_are_not_graph_inputs_but_are_passed_when_running():
    def fn(x, n: int, flag: bool):
        return x * n if flag else x

    program = _export(_Lambda(fn), torch.randn(2, 3), 3, True)
    graph = from_exported_program(program)
    assert [v.name for v in graph.inputs] == ["args_0"]
    assert user_input_names(program) == ["args_0", "args_1", "args_2"]
    args, kwargs = call_arguments(program, {"args_0": torch.ones(2, 3)})
    assert args[1:] == (3, True) and kwargs == {}
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"]
    assert torch.equal(optimized.module()(torch.ones(2, 3), 3, True), torch.full((2, 3), 3.0))


def test_opaque_calls_on_constants_fold_through_torch():
    class Flip(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.arange(4.0))

        def forward(self, x):
            return x * torch.flip(self.scale, [0])

    program = _export(Flip(), torch.randn(2, 4))
    optimized, report = graphopt.optimize(program, only=["fold_constants"])
    assert report.verification["ok"]
    targets = {str(n.target) for n in optimized.graph.nodes if n.op == "call_function"}
    assert "aten.flip.default" not in targets
    (spec,) = [s for s in optimized.graph_signature.input_specs if s.target == "scale_fused"]
    assert spec.kind == InputKind.BUFFER and spec.persistent  # computed from a persistent buffer
    assert optimized.state_dict["scale_fused"].tolist() == [3.0, 2.0, 1.0, 0.0]


def test_an_optimized_program_reads_back_as_fused_canonical_ops():
    optimized, _ = graphopt.optimize(tp.program("mlp_ln_gelu", "exported"))
    assert any(str(n.target).startswith("graphopt.") for n in optimized.graph.nodes)
    counts = op_counts(from_exported_program(optimized))
    assert all(":" not in op for op in counts)
    assert Op.NORM_ACT_LINEAR in counts or Op.NORM_ACT in counts


class UnreadHead(nn.Module):
    """A pooling head computed and not returned (SigLIP's vision model beside its last hidden state):
    torch.export keeps such calls in its graph."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        self.b(h).softmax(-1).mean(1)
        return h


def test_pure_calls_nothing_reads_are_removed():
    program = _export(UnreadHead().eval(), torch.randn(2, 4, 8))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"]
    targets = [str(n.target) for n in optimized.graph.nodes if n.op == "call_function"]
    assert targets == ["aten.linear.default"], targets
