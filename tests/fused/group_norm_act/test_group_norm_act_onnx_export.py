"""torch.onnx.export of the group norm torch ops (graphopt.fused.export): both exporters write
graphopt::GroupNormAct nodes, which run through their fallback functions in a plain ONNX Runtime."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fused_checks import assert_close, session

from graphopt.fused import export, register_torch_ops

ops = register_torch_ops()


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter(1 + 0.3 * torch.randn(8, generator=gen))
        self.bias = torch.nn.Parameter(0.3 * torch.randn(8, generator=gen))

    def forward(self, x, r):
        y, total = torch.ops.graphopt.add_group_norm_act(x, r, self.weight, self.bias, 4, "silu", 1e-5)
        return torch.ops.graphopt.group_norm_act(y, None, self.bias, 2, "gelu", 1e-6) + total


@pytest.mark.parametrize("dynamo", [True, False])
def test_both_exporters_write_group_norm_act_nodes(dynamo):
    gen = torch.Generator().manual_seed(1)
    args = (torch.randn(2, 8, 3, 5, generator=gen), torch.randn(2, 8, 3, 5, generator=gen))
    model = export(Block(), args, dynamo=dynamo)
    fused = [n for n in model.graph.node if n.op_type == "GroupNormAct"]
    assert [n.domain for n in fused] == ["graphopt", "graphopt"]
    assert sorted(len([o for o in n.output if o]) for n in fused) == [1, 2]
    feeds = {i.name: a.numpy() for i, a in zip(model.graph.input, args, strict=True)}
    (out,) = session(model).run(None, feeds)
    with torch.no_grad():
        expected = Block()(*args).double().numpy()
    assert_close(out, expected, "float32")
    assert np.isfinite(out).all()
