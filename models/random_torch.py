"""A random program (models/random_program.py) as an ``nn.Module``, exported with ``torch.export``.

    program = draw_program(choices, torch_form=True)
    exported = to_exported_program(program)     # symbolic batch exported as a dynamic dim

The module spells each block the way model code does (``F.layer_norm`` or the formula, ``torch.split`` /
``chunk`` / slicing / ``unbind``, ``torch.stack`` / ``cat``), with the same constants as the ONNX form.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.nn import functional as F

from models.random_program import Act, Arith, Linear, Norm, Parallel, PieceOp, Program, Residual, Split, Views
from models.random_weights import Weights

# The batch size a symbolic batch is exported with (2 or more, so torch does not specialize it).
EXAMPLE_BATCH = 3


class RandomModule(torch.nn.Module):
    """Constants are registered as buffers by one eager run at construction, in the order the forward
    asks for them; the exported program then reads them as buffers."""

    def __init__(self, program: Program):
        super().__init__()
        self.program = program
        self.names: list[str] = []
        self._weights: Weights | None = Weights(program)
        with torch.no_grad():
            self(*example_inputs(program))
        self._weights = None  # every constant exists now

    def const(self, make) -> torch.Tensor:
        name = f"c{len(self.names)}"
        self.names.append(name)
        if self._weights is not None:
            array = np.asarray(make(self._weights), dtype=self.program.dtype)
            self.register_buffer(name, torch.from_numpy(array.copy()))
        return getattr(self, name)

    def forward(self, x, *extra):
        self.names = []
        values, outputs = [x], []
        inputs = iter(extra)
        for step in self.program.steps:
            self.width = self.program.widths[step.source]
            values.append(self.block(step.block, values[step.source], values, outputs, inputs))
        return (values[-1], *(values[i] for i in self.program.extra_outputs), *outputs)

    # -- blocks ----------------------------------------------------------------------------------

    def block(self, block, x, values, outputs, inputs):
        if isinstance(block, Act):
            return self.act(x, block.kind, block.spelled_out)
        if isinstance(block, Norm):
            return self.norm(block, x, values)
        if isinstance(block, Arith):
            return self.arith(block, x)
        if isinstance(block, Linear):
            return self.linear(block, x)
        if isinstance(block, Views):
            return self.views(block, x)
        if isinstance(block, Residual):
            return x + values[block.other]
        if isinstance(block, Split):
            return self.split(block, x, outputs)
        if isinstance(block, Parallel):
            starts = [next(inputs) for _ in range(block.sources)]
            results = [self.chain(s, block.chain, i, block.sources) for i, s in enumerate(starts)]
            return x + torch.stack(results).mean(0)
        raise TypeError(block)

    def act(self, x, kind: str, spelled_out: bool):
        if kind == "relu":
            return torch.relu(x)
        if kind == "tanh":
            return torch.tanh(x)
        if kind == "sigmoid":
            return torch.sigmoid(x)
        if not spelled_out:
            if kind == "silu":
                return F.silu(x)
            return F.gelu(x, approximate="tanh" if kind == "gelu_tanh" else "none")
        if kind == "silu":
            return x * torch.sigmoid(x)
        if kind == "gelu":
            return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3))
        return 0.5 * x * (1.0 + torch.tanh(inner))

    def norm(self, block: Norm, x, values):
        if block.residual is not None:
            x = x + values[block.residual]
        width = self.width
        scale = self.const(lambda w: w.vector(width, center=1.0)) if block.scale else None
        bias = self.const(lambda w: w.vector(width)) if block.bias else None
        if block.spelling == "op":
            if block.kind == "layer":
                y = F.layer_norm(x, (width,), scale, bias, eps=block.eps)
                scale = bias = None
            else:
                y = F.rms_norm(x, (width,), scale, eps=block.eps)
                scale = None
        elif block.spelling == "var_mean":
            if block.kind == "layer":
                var, mean = torch.var_mean(x, -1, correction=0, keepdim=True)
                y = (x - mean) * torch.rsqrt(var + block.eps)
            else:
                y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + block.eps)
        else:
            centered = x - x.mean(-1, keepdim=True) if block.kind == "layer" else x
            square = centered.pow(2) if block.spelling == "pow_div" else centered * centered
            root = torch.sqrt(square.mean(-1, keepdim=True) + block.eps)
            y = centered / root if block.spelling == "pow_div" else centered * torch.reciprocal(root)
        if scale is not None:
            y = y * scale
        if bias is not None:
            y = y + bias
        if block.act:
            y = self.act(y, block.act.kind, block.act.spelled_out)
        if block.head is None:
            return y
        weight = self.const(lambda w: w.matrix(width, block.head))
        y = y @ weight + self.const(lambda w: w.vector(block.head))
        return self.act(y, block.head_act, False) if block.head_act else y

    def arith(self, block: Arith, x):
        width = self.width

        def make(w):
            if block.per_channel:
                values = w.vector(width, center=1.0 if block.op in ("mul", "div") else 0.0)
            else:
                values = np.array(w.scalar(away_from_zero=block.op == "div"))
            if block.op == "div":
                values = np.where(np.abs(values) < 0.25, 0.5, values)
            return values

        c = self.const(make)
        a, b = (c, x) if block.constant_first else (x, c)
        return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[block.op](a, b)

    def linear(self, block: Linear, x):
        width = self.width
        weight = self.const(lambda w: w.matrix(width, block.out_width))
        bias = self.const(lambda w: w.vector(block.out_width)) if block.bias else None
        return F.linear(x, weight.T, bias)

    def views(self, block: Views, x):
        shape = x.shape
        if block.kind == "reshape_pair":
            inner = x.reshape(*shape[:-1], shape[-1] // block.inner, block.inner)
            return inner.reshape(shape)
        if block.kind == "unsqueeze_reshape":
            return x.unsqueeze(1).reshape(shape)
        return x.reshape(shape)

    # -- horizontal structures -------------------------------------------------------------------

    def split(self, block: Split, x, outputs):
        axis = block.axis
        size = x.shape[axis]
        pieces = self.cut(x, block, size)
        results = []
        for i, piece in enumerate(pieces):
            y = self.chain(piece, block.chain, i, len(pieces), other_act=block.differ == i)
            if block.leak == i:
                outputs.append(y)
            results.append(y)
        if block.covered is not None:
            results.append(
                x.narrow(
                    axis, size // block.pieces * block.covered, size - size // block.pieces * block.covered
                )
            )
        if block.source == "gather":
            if block.combine == "stack_first":
                return torch.stack(results).movedim(0, axis)
            return torch.stack(results, axis)
        if block.combine == "concat":
            return torch.cat(results, axis)
        if block.combine == "stack_first":
            return torch.stack(results).movedim(0, axis).reshape(x.shape)
        return torch.stack(results, axis + 1).reshape(x.shape)

    def cut(self, x, block: Split, size: int):
        axis = block.axis
        if block.source == "gather":
            return list(x.unbind(axis))
        step = size // block.pieces
        if block.uneven:
            sizes = [step] * block.pieces
            sizes[0] -= 1
            sizes[-1] += 1
            return list(torch.split(x, sizes, axis))
        count = block.covered if block.covered is not None else block.pieces
        if block.source == "slice":
            index = [slice(None)] * x.dim()
            pieces = []
            for i in range(count):
                index[axis] = slice(i * step, (i + 1) * step)
                pieces.append(x[tuple(index)])
            return pieces
        if block.source == "split_even":
            return list(torch.chunk(x, block.pieces, axis))
        return list(torch.split(x, step, axis))

    def chain(self, x, chain: tuple[PieceOp, ...], index: int, count: int, other_act: bool = False):
        for op in chain:
            if op.kind == "act":
                kind = {"tanh": "sigmoid", "sigmoid": "relu", "relu": "tanh"}[op.act] if other_act else op.act
                x = self.act(x, kind, False)
            elif op.kind == "norm":
                x = F.layer_norm(x, (x.shape[-1],), eps=1e-5)
            else:
                value = 1.0 + 0.125 * (index + 1) if op.per_piece else 1.5
                x = x * value if op.kind == "scale" else x + (value - 1.0)
        return x


def example_inputs(program: Program) -> tuple[torch.Tensor, ...]:
    batch = program.batch if isinstance(program.batch, int) else EXAMPLE_BATCH
    rows = [program.rows] if program.rows is not None else []
    generator = torch.Generator().manual_seed(program.seed)
    dtype = getattr(torch, program.dtype)
    widths = [program.width] + [
        program.widths[step.source] for step in program.steps for _ in range(_extra_inputs(step.block))
    ]
    return tuple(torch.randn(batch, *rows, w, generator=generator).to(dtype) for w in widths)


def _extra_inputs(block) -> int:
    return block.sources if isinstance(block, Parallel) else 0


def to_exported_program(program: Program) -> torch.export.ExportedProgram:
    module = RandomModule(program).eval()
    inputs = example_inputs(program)
    dynamic = None
    if not isinstance(program.batch, int):
        batch = torch.export.Dim("batch", min=1)
        extra = tuple({0: batch} for _ in inputs[1:])
        dynamic = ({0: batch}, extra) if extra else ({0: batch},)  # (x, *extra)
    return torch.export.export(module, inputs, dynamic_shapes=dynamic)
