"""Small modules and hand-built ONNX graphs around group norm, shared by the group norm pass tests."""

from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

F = torch.nn.functional
ACTIVATIONS = {"silu": F.silu, "gelu": F.gelu, "relu": torch.relu, "tanh": torch.tanh, None: lambda t: t}


class GroupNormAct(torch.nn.Module):
    """conv → GroupNorm (random scale and bias) → activation → conv, optionally with a residual add
    of a second input before the norm whose sum is read again by the output (``keep_sum``)."""

    def __init__(self, act="silu", channels=16, groups=4, residual=False, keep_sum=False, affine=True):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = torch.nn.GroupNorm(groups, channels, eps=1e-6, affine=affine)
        if affine:
            with torch.no_grad():
                self.norm.weight.copy_(1.0 + 0.3 * torch.randn(channels, generator=gen))
                self.norm.bias.copy_(0.3 * torch.randn(channels, generator=gen))
        self.out = torch.nn.Conv2d(channels, channels, 1)
        self.act, self.residual, self.keep_sum = ACTIVATIONS[act], residual, keep_sum

    def forward(self, x, r=None):
        h = self.conv(x)
        s = h + r if self.residual else h
        y = self.out(self.act(self.norm(s)))
        return y + s if self.keep_sum else y


def inputs(batch=2, channels=16, size=6, dtype=torch.float32, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(batch, channels, size, size, generator=gen).to(dtype) for _ in range(2))


def onnx_model(nodes, initializers, x_shape, opset=18, y_shape=None) -> onnx.ModelProto:
    """A model of input ``x`` (float32, ``x_shape``) and output ``y`` (``y_shape``, by default x's)."""
    graph = helper.make_graph(
        nodes,
        "group_norm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape or x_shape)],
        [numpy_helper.from_array(np.asarray(v), name) for name, v in initializers.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def silu_nodes(source: str, output: str = "y") -> list[onnx.NodeProto]:
    return [
        helper.make_node("Sigmoid", [source], ["gate"]),
        helper.make_node("Mul", [source, "gate"], [output]),
    ]


def instance_norm_graph(
    *, split=(0, 4, -1), merge=None, norm_scale=1.0, x_shape=(2, 16, 3, 3), w_shape=None
) -> onnx.ModelProto:
    """The exporters' spelling: Reshape → InstanceNormalization → Reshape → Mul → Add → SiLU."""
    rng = np.random.default_rng(0)
    groups = split[1]
    per_channel = (x_shape[1],) + (1,) * (len(merge or x_shape) - 2)
    initializers = {
        "split": np.asarray(split, dtype=np.int64),
        "merge": np.asarray(merge or x_shape, dtype=np.int64),
        "ones": np.full(groups, norm_scale, dtype=np.float32),
        "zeros": np.zeros(groups, dtype=np.float32),
        "w": (1.0 + 0.3 * rng.standard_normal(w_shape or per_channel)).astype(np.float32),
        "b": (0.3 * rng.standard_normal(per_channel)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Reshape", ["x", "split"], ["grouped"]),
        helper.make_node("InstanceNormalization", ["grouped", "ones", "zeros"], ["normed"], epsilon=1e-5),
        helper.make_node("Reshape", ["normed", "merge"], ["merged"]),
        helper.make_node("Mul", ["merged", "w"], ["scaled"]),
        helper.make_node("Add", ["scaled", "b"], ["shifted"]),
        *silu_nodes("shifted"),
    ]
    return onnx_model(nodes, initializers, list(x_shape), y_shape=list(merge or x_shape))
