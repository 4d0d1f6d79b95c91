import warnings

import pytest
import torch
import torch_programs as tp
from torch import nn
from torch.export.graph_signature import InputKind

import graphopt
from graphopt.analysis import verify
from graphopt.backends.torch_export import save_pt2, to_exported_program
from graphopt.frontends.torch_export import from_exported_program
from graphopt.ir import Op
from graphopt.rewrite import Builder


class PerSliceNorm(nn.Module):
    """Per-slice LayerNorms with their own weights: batching them stacks the weights."""

    def __init__(self, n=4, d=8):
        super().__init__()
        self.d = d
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(n))
        for norm in self.norms:
            nn.init.normal_(norm.weight)
            nn.init.normal_(norm.bias)

    def forward(self, x):
        pieces = torch.split(x, self.d, -1)
        return torch.stack([torch.tanh(m(p)) for m, p in zip(self.norms, pieces, strict=True)])


def _export(module, *inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(module.eval(), inputs)


def _calls(program):
    return [n for n in program.graph.nodes if n.op == "call_function"]


def test_weights_a_pass_stacks_become_parameters_of_the_program_not_ops():
    torch.manual_seed(0)
    program = _export(PerSliceNorm(), torch.randn(3, 32))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"]
    stacked = {s.target for s in optimized.graph_signature.input_specs if s.kind == InputKind.PARAMETER}
    assert stacked == {"norms.0_to_3.weight", "norms.0_to_3.bias"}
    assert all(optimized.state_dict[t].shape[-2:] == (4, 8) for t in stacked)
    assert not optimized.constants
    merged = ", ".join(f"norms.{i}.weight" for i in range(4))
    assert f"{merged} merged into parameter norms.0_to_3.weight (1x4x8)" in report.notes
    (x,) = [n for n in optimized.graph.find_nodes(op="placeholder") if n.name == "x"]
    reached = {x}
    for node in optimized.graph.nodes:
        if any(a in reached for a in node.all_input_nodes):
            reached.add(node)
    assert all(node in reached for node in _calls(optimized))  # nothing is computed from weights alone


class HyphenatedBlocks(nn.Module):
    """Blocks registered under names that are no Python identifiers (torchvision's RegNet names its
    blocks ``block1-0``), each a conv whose batch norm folds into new weights."""

    def __init__(self):
        super().__init__()
        for i in range(2):
            self.add_module(f"block1-{i}", nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3), nn.ReLU()))

    def forward(self, x):
        for block in self.children():
            x = block(x)
        return x


def test_new_weights_of_modules_named_with_other_characters_get_placeholder_names_python_takes():
    torch.manual_seed(0)
    module = HyphenatedBlocks()
    for child in module.modules():
        if isinstance(child, nn.BatchNorm2d):
            nn.init.normal_(child.weight)
            child.running_var.uniform_(0.5, 2.0)
    program = _export(module, torch.randn(2, 3, 4, 4))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"]
    made = [s for s in optimized.graph_signature.input_specs if s.kind == InputKind.PARAMETER]
    assert {s.target for s in made} >= {"block1-0.0.weight_fused", "block1-1.0.weight_fused"}
    assert all(s.arg.name.isidentifier() for s in made)
    x = torch.randn(2, 3, 4, 4)
    torch.testing.assert_close(optimized.module()(x), program.module()(x))


def test_parameters_the_passes_no_longer_read_leave_the_program():
    program = tp.program("split_stack", "decomposed")
    optimized, report = graphopt.optimize(program)
    names = [s.target for s in optimized.graph_signature.input_specs if s.kind == InputKind.PARAMETER]
    assert set(optimized.state_dict) == set(names)
    assert names == ["linear.weight", "linear.bias"]  # the fused op reads the Linear's own weights
    assert optimized.state_dict["linear.weight"].data_ptr() == program.state_dict["linear.weight"].data_ptr()
    assert (
        "no longer read (their values were folded into the computation): norm.weight, norm.bias"
        in (report.notes[-1])
    )  # (an all-ones scale and a zero shift: the fused norm has neither)
    kept, _ = graphopt.optimize(program, skip=["remove_dead_nodes"])
    assert set(kept.state_dict) == set(program.state_dict)


def test_a_group_a_pass_broke_is_written_from_its_canonical_ops():
    program = tp.program("mlp", "decomposed")
    graph = from_exported_program(program)
    (matmul, *_) = graph.nodes_of(Op.MATMUL)
    builder = Builder(graph, "probe")
    extra = builder.relu(matmul.output)  # a new reader inside addmm = matmul + add
    graph.set_outputs([builder.add(graph.outputs[0], builder.reduce_mean(extra, axes=(1,), keepdims=True))])
    verify(graph)
    rebuilt = to_exported_program(graph)
    targets = [n.target for n in _calls(rebuilt)]
    assert targets.count(torch.ops.aten.addmm.default) == 1  # the untouched second layer
    assert torch.ops.aten.mm.default in targets
    x = tp.SPECS["mlp"].inputs(seed=4)[0]
    product = x @ program.state_dict["0.weight"].T
    want = tp.outputs(program, (x,))[0] + torch.relu(product).mean(1, True)
    torch.testing.assert_close(tp.outputs(rebuilt, (x,))[0], want)


def test_recognized_linears_are_written_as_aten_linear():
    program = tp.program("mlp", "decomposed")
    optimized, report = graphopt.optimize(program, only=["recognize_linear"])
    assert report.verification["ok"]
    targets = [n.target for n in _calls(optimized)]
    assert targets.count(torch.ops.aten.linear.default) == 2
    assert torch.ops.aten.addmm.default not in targets and torch.ops.aten.permute.default not in targets
    for node in _calls(optimized):
        if node.target is torch.ops.aten.linear.default:
            assert node.meta["graphopt_rule"].startswith("linear_")


def test_subgraph_modules_of_higher_order_ops_are_kept():
    program = tp.program("cond", "exported")
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"]
    assert isinstance(optimized.graph_module.true_graph_0, torch.fx.GraphModule)
    assert isinstance(optimized.graph_module.false_graph_0, torch.fx.GraphModule)


def test_every_call_of_an_optimized_program_has_a_fake_value():
    for name in ("mlp_dynamic_batch", "transformer_encoder", "rms_silu"):
        for form in ("exported", "decomposed"):
            optimized, _ = graphopt.optimize(tp.program(name, form))
            assert all("val" in n.meta for n in _calls(optimized)), (name, form)


def test_save_pt2_writes_atomically(tmp_path):
    program = tp.program("mlp", "exported")
    target = save_pt2(program, tmp_path / "model.pt2")
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt2"]
    loaded = torch.export.load(target)
    x = tp.SPECS["mlp"].inputs()[0]
    assert torch.equal(tp.outputs(loaded, (x,))[0], tp.outputs(program, (x,))[0])
    with pytest.raises(TypeError):
        save_pt2("not a program", tmp_path / "other.pt2")
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt2"]
