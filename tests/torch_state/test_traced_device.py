"""Conversions to the device a program was traced on, and the metadata checks beside them, pin the
exported program to that device. Read as the casts they were when traced, they leave the optimized
program free to move: it runs on another device where the original cannot."""

import warnings

import pytest
import torch
from torch import nn

import graphopt


class PinnedToCpu(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return nn.functional.gelu(self.norm(x.to("cpu").float()))


def _programs():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(PinnedToCpu().eval(), (torch.randn(4, 16),))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"]
    return program, optimized


def _device_arguments(program) -> list:
    return [
        node.format_node()
        for node in program.graph.nodes
        if any(isinstance(a, torch.device) for a in (*node.args, *node.kwargs.values()))
    ]


def test_the_optimized_program_names_no_device_and_runs_on_another():
    program, optimized = _programs()
    assert _device_arguments(program)
    assert _device_arguments(optimized) == []
    x = torch.randn(4, 16)
    moved = optimized.module().to("meta")
    assert moved(x.to("meta")).device.type == "meta"
    with pytest.raises(Exception, match="meta"):
        program.module().to("meta")(x.to("meta"))


class CastUnderNoGrad(nn.Module):
    """torch.export writes the no_grad region as a ``wrap_with_set_grad_enabled`` call of a subgraph
    module, with the conversion to the traced device and the cast's metadata checks inside it."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        with torch.no_grad():
            y = x.to("cpu").float() * 2
        return nn.functional.gelu(self.norm(y + x))


def _subgraph_nodes(module) -> list[str]:
    return [
        node.format_node()
        for name, sub in module.named_modules()
        if name and isinstance(sub, torch.fx.GraphModule)
        for node in sub.graph.nodes
    ]


def _subgraph_asserts(module) -> list[str]:
    return [
        f"{name}: {node.format_node()}"
        for name, sub in module.named_modules()
        if name and isinstance(sub, torch.fx.GraphModule)
        for node in sub.graph.nodes
        if node.target is torch.ops.aten._assert_tensor_metadata.default
    ]


def test_subgraph_modules_are_the_optimized_programs_own_and_free_to_move():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(CastUnderNoGrad().eval(), (torch.randn(4, 16),))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"] and report.ops_after.get("graphopt.norm_act") == 1
    assert _subgraph_asserts(program.graph_module)
    assert _subgraph_asserts(optimized.graph_module) == []
    # Copies, not the input program's modules: rewriting one program's subgraph leaves the other's.
    ours = dict(optimized.graph_module.named_children())
    for name, theirs in program.graph_module.named_children():
        if isinstance(theirs, torch.fx.GraphModule):
            assert ours[name] is not theirs
    assert [n for n in _subgraph_nodes(program.graph_module) if "device" in n]
    assert [n for n in _subgraph_nodes(optimized.graph_module) if "device" in n] == []
    x = torch.randn(4, 16)
    torch.testing.assert_close(optimized.module()(x), program.module()(x), rtol=1e-6, atol=1e-6)
    assert optimized.module().to("meta")(x.to("meta")).device.type == "meta"
    with pytest.raises(Exception, match=r"meta|device"):
        program.module().to("meta")(x.to("meta"))
