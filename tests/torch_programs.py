"""Small modules exported with torch.export, as exported and after run_decompositions(), cached per run.

Each spec builds its module (seeded), its example inputs and fresh random inputs of the same kind.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class Spec:
    name: str
    module: Callable[[], nn.Module]
    shapes: tuple[tuple[int, ...], ...]
    dynamic: dict[int, int] | None = None  # input index -> dynamic axis ("batch")
    dtype: torch.dtype = torch.float32

    def inputs(self, seed: int = 0, batch: int | None = None) -> tuple[torch.Tensor, ...]:
        generator = torch.Generator().manual_seed(seed)
        made = []
        for i, shape in enumerate(self.shapes):
            shape = list(shape)
            if batch is not None and self.dynamic and i in self.dynamic:
                shape[self.dynamic[i]] = batch
            made.append(torch.randn(shape, generator=generator).to(self.dtype))
        return tuple(made)


class SplitStack(nn.Module):
    """split → view → layer_norm → tanh per slice → stack → linear → relu (the seed's shape)."""

    def __init__(self, n: int = 4, b: int = 3, d: int = 8):
        super().__init__()
        self.b, self.d = b, d
        self.norm = nn.LayerNorm(d)
        self.linear = nn.Linear(d, 2)

    def forward(self, x):
        pieces = [torch.tanh(self.norm(p.view(self.b, self.d))) for p in torch.split(x, self.b * self.d)]
        return torch.relu(self.linear(torch.stack(pieces)))


class RmsSilu(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.RMSNorm(16)
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(F.silu(self.up(self.norm(x))))


class ConvBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class Buffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))
        self.register_buffer("offset", torch.full((8,), 0.25), persistent=False)
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        return self.linear(x * self.scale + self.offset) + torch.tensor([1.0, -1.0] * 4)


class MiscOps(nn.Module):
    """chunk, unbind, cat, transpose, mean, var_mean, sigmoid, scalars on either side, a dtype cast."""

    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        rows = x.unbind(1)
        var, mean = torch.var_mean(x, dim=-1, keepdim=True)
        y = torch.cat([torch.sigmoid(a) * 2.0, 1 - b], dim=-1).transpose(0, 1)
        z = (x - mean) / torch.sqrt(var + 1e-5)
        return y.mean(dim=0), rows[0] ** 2, z.to(torch.float64), torch.rsqrt(x.abs() + 1)


class Cond(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: self.linear(t).relu(), lambda t: t.sin(), (x,)) + 1


class Outputs(nn.Module):
    """Returns an input, a buffer-derived value and one value twice."""

    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.arange(4.0))

    def forward(self, x, y):
        s = torch.tanh(x) + y
        return x, s, self.bias * 1.0, s


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))


def _ln_gelu() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(approximate="tanh"), nn.Linear(32, 8))


def _encoder() -> nn.Module:
    return nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)


SPECS = {
    s.name: s
    for s in (
        Spec("mlp", _mlp, ((4, 16),)),
        Spec("mlp_ln_gelu", _ln_gelu, ((2, 3, 16),)),
        Spec("mlp_dynamic_batch", _ln_gelu, ((4, 16),), dynamic={0: 0}),
        Spec("rms_silu", RmsSilu, ((2, 5, 16),)),
        Spec("conv_bn", ConvBn, ((2, 3, 8, 8),)),
        Spec("transformer_encoder", _encoder, ((2, 5, 16),)),
        Spec("buffers", Buffers, ((3, 8),)),
        Spec("split_stack", SplitStack, ((96,),)),
        Spec("misc_ops", MiscOps, ((3, 6),)),
        Spec("cond", Cond, ((2, 4),)),
        Spec("outputs", Outputs, ((2, 4), (2, 4))),
        Spec("bf16_mlp", _mlp, ((4, 16),), dtype=torch.bfloat16),
    )
}


def build(name: str) -> nn.Module:
    spec = SPECS[name]
    torch.manual_seed(sum(map(ord, name)))
    module = spec.module().to(spec.dtype) if spec.dtype != torch.float32 else spec.module()
    return module.eval()


@functools.cache
def exported(name: str) -> torch.export.ExportedProgram:
    spec = SPECS[name]
    dynamic = None
    if spec.dynamic:
        batch = torch.export.Dim("batch", min=2)
        axes = spec.dynamic
        dynamic = tuple({axes[i]: batch} if i in axes else None for i in range(len(spec.shapes)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(build(name), spec.inputs(), dynamic_shapes=dynamic)


@functools.cache
def decomposed(name: str) -> torch.export.ExportedProgram:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exported(name).run_decompositions()


def program(name: str, form: str) -> torch.export.ExportedProgram:
    return exported(name) if form == "exported" else decomposed(name)


def outputs(program: torch.export.ExportedProgram, inputs) -> list[torch.Tensor]:
    with torch.no_grad():
        result = program.module()(*inputs)
    return list(result) if isinstance(result, tuple | list) else [result]
