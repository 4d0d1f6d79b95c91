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
