"""In-place calls whose write nothing observes are read as their functional form (and stay in place in a
program written back without passes); calls whose write is observed stay verbatim and opaque."""

from collections import Counter

import torch
from torch import nn

import graphopt
from graphopt.backends.torch_export import to_exported_program
from graphopt.frontends.torch_export import from_exported_program
from graphopt.ir import Op


def _ops(module: nn.Module, args: tuple) -> Counter:
    graph = from_exported_program(torch.export.export(module.eval(), args))
    return Counter(node.op for node in graph)


def _calls(program) -> Counter:
    return Counter(str(n.target) for n in program.graph.nodes if n.op == "call_function")


class Activations(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x, y):
        a = torch.relu_(self.conv(x))
        b = nn.functional.hardswish(a, inplace=True)
        b += y
        return nn.functional.silu(b, inplace=True)


def test_unobserved_writes_are_read_as_functional_ops():
    ops = _ops(Activations(), (torch.randn(1, 4, 5, 5), torch.randn(1, 4, 5, 5)))
    assert ops[Op.RELU] == ops[Op.ADD] == ops[Op.SILU] == 1
    assert ops["aten:hardswish.default"] == 1
    assert not [op for op in ops if op.startswith("aten:") and op.split(".")[0].endswith("_")], ops


def test_unobserved_writes_are_written_back_in_place_without_passes():
    program = torch.export.export(Activations().eval(), (torch.randn(1, 4, 5, 5), torch.randn(1, 4, 5, 5)))
    rebuilt = to_exported_program(from_exported_program(program))
    assert rebuilt.graph_module.code == program.graph_module.code


class ReadAfterWrite(nn.Module):
    def forward(self, x):
        a = x * 2
        a.view(-1).relu_()
        return a * 3  # (reads a, which the write through its view changed)


class WriteThroughView(nn.Module):
    def forward(self, x):
        mask = x * 1.0
        mask[:, :2].relu_()
        return mask


class WriteToInput(nn.Module):
    def forward(self, x):
        return x.relu_() * 2


def test_observed_writes_stay_verbatim_and_opaque():
    for module in (ReadAfterWrite(), WriteThroughView(), WriteToInput()):
        ops = _ops(module, (torch.randn(3, 4),))
        assert ops["aten:relu_.default"] == 1 and Op.RELU not in ops, (type(module).__name__, ops)


def test_observed_writes_compute_what_the_module_does():
    for module in (ReadAfterWrite(), WriteThroughView()):
        x = torch.randn(3, 4)
        optimized, report = graphopt.optimize(torch.export.export(module, (x,)))
        assert report.verification["ok"], report.verification["summary"]
        torch.testing.assert_close(optimized.module()(x.clone()), module(x.clone()))


class MergedThenWritten(nn.Module):
    """Two equal values, one written in place, the other read after the write: once a pass merges them,
    the write is observed, so the optimized program must write the functional op."""

    def forward(self, x):
        first = x * 2
        second = x * 2
        return first.relu_() + second


def test_a_write_a_merge_made_observable_is_written_functional():
    x = torch.randn(3, 4)
    module = MergedThenWritten()
    optimized, report = graphopt.optimize(torch.export.export(module, (x,)))
    assert report.verification["ok"], report.verification["summary"]
    calls = _calls(optimized)
    assert calls["aten.mul.Tensor"] == 1, calls  # (merged)
    assert calls["aten.relu.default"] == 1 and "aten.relu_.default" not in calls, calls
    torch.testing.assert_close(optimized.module()(x), module(x))
