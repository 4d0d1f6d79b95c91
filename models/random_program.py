"""Random programs for differential testing: what a graph computes, independent of how it is spelled.

    from models.random_program import SeededChoices, draw_program
    program = draw_program(SeededChoices(seed))          # or HypothesisChoices(data) in the property tests
    model = random_onnx.to_onnx(program)                # models/random_onnx.py
    exported = random_torch.to_exported_program(program)  # models/random_torch.py

A program maps one input ``x[batch, (rows,) width]`` through a sequence of blocks. Each block reads
one earlier value (usually the latest; sometimes an older one, which gives intermediates extra users)
and produces one value. The blocks are the shapes the passes look for, in the spellings exporters
write, plus near misses:

* ``Split``: a tensor cut into N pieces (split, equal slices, gathers, chunk/unbind), the same short
  chain on each piece, joined by concat or stack (+ transpose/reshape back): batch_split_chains.
  Near misses: unequal pieces, one chain that differs, an intermediate that is also an output.
* ``Parallel``: N extra inputs through identical chains, stacked and averaged: batch_parallel_chains.
* ``Norm``: layer or RMS norm, as one op or written out (pow or mul, div or reciprocal, var_mean),
  with scale/bias, an optional residual add in front and an optional activation after: recognize_norms,
  fuse_norm_act, and with a following ``Linear`` fuse_norm_act_linear.
* ``Act``: relu, tanh, sigmoid, GELU (erf or tanh form), SiLU, as one op or written out.
* ``Arith``: add/sub/mul/div with a scalar or per-channel constant; ``Linear``: matmul (+ bias) or Gemm;
  ``Views``: reshape pairs, unsqueeze + reshape, no-op reshapes; ``Residual``: the sum of two values.

The choices come from a ``Choices`` object: seeded (the long runs: graph i is seed i) or drawn by
hypothesis (the property tests, which then shrink a failure to a small program).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

T = TypeVar("T")

ACTIVATIONS = ("relu", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu")
# Activations written out in elementwise ops in some spellings (the rest are always one op).
SPELLED_OUT = ("gelu", "gelu_tanh", "silu")
PIECE_OPS = ("act", "scale", "shift", "norm")


class Choices(Protocol):
    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high]; simpler (for shrinking) towards low."""

    def choice(self, options: Sequence[T]) -> T:
        """One of the options; simpler towards the first."""


class SeededChoices:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]


def chance(choices: Choices, percent: int) -> bool:
    return choices.integer(0, 99) < percent


@dataclass(frozen=True)
class Act:
    kind: str
    spelled_out: bool = False


@dataclass(frozen=True)
class Norm:
    kind: str  # "layer" | "rms"
    spelling: str  # "op" | "pow_div" | "mul_reciprocal" | "var_mean" (torch only)
    eps: float
    scale: bool
    bias: bool
    residual: int | None = None  # a value added in front of the norm
    act: Act | None = None
    head: int | None = None  # a linear layer to this width after the activation (+ bias + activation)
    head_act: str | None = None


@dataclass(frozen=True)
class Arith:
    op: str  # "add" | "sub" | "mul" | "div"
    per_channel: bool
    # c + x, c * x (never c / x: it could divide by ~0; never c - x: a residual add of x would cancel
    # it to a constant, and a norm of constant rows is 0 / 0)
    constant_first: bool


@dataclass(frozen=True)
class Linear:
    out_width: int
    bias: bool
    gemm: bool  # ONNX Gemm (rank 2 only) instead of MatMul + Add


@dataclass(frozen=True)
class Views:
    kind: str  # "reshape_pair" | "unsqueeze_reshape" | "noop_reshape"
    inner: int  # the factor of width the reshape pair splits off


@dataclass(frozen=True)
class Residual:
    other: int


@dataclass(frozen=True)
class PieceOp:
    kind: str  # "act" | "scale" | "shift" | "norm"
    act: str = "relu"
    per_piece: bool = False  # a different constant for each piece (stacked by the rewrite)


@dataclass(frozen=True)
class Split:
    pieces: int
    axis: int  # the rank axis cut (the width or the rows axis)
    source: str  # "split" | "split_even" (num_outputs / chunk) | "slice" | "gather" (unbind)
    chain: tuple[PieceOp, ...]
    combine: str  # "concat" | "stack" (+ reshape) | "stack_first" (+ transpose + reshape)
    uneven: bool = False  # near miss: pieces of different sizes
    differ: int | None = None  # near miss: this piece's chain has another activation
    leak: int | None = None  # near miss: this piece's first result is also a graph output
    covered: int | None = None  # slices covering only this many pieces' worth (the rest passes through)


@dataclass(frozen=True)
class Parallel:
    """Extra graph inputs (``p{step}_{i}``, shaped like the source value) through identical chains,
    stacked and averaged, added to the source value. Chains are traced back to run-time values that no
    batchable op produces, so independent chains need inputs of their own."""

    sources: int
    chain: tuple[PieceOp, ...]


Block = Act | Norm | Arith | Linear | Views | Residual | Split | Parallel


@dataclass(frozen=True)
class Step:
    block: Block
    source: int  # index of the value read (0 is the input)


@dataclass(frozen=True)
class Program:
    dtype: str  # "float32" | "float16" | "float64"
    batch: int | str  # a size, or "batch" (symbolic)
    rows: int | None  # a middle axis (rank 3) or None (rank 2)
    width: int
    steps: tuple[Step, ...]
    extra_outputs: tuple[int, ...]  # intermediate values that are also graph outputs
    opset: int = 18
    constants_as_nodes: bool = False  # ONNX: scalars as Constant nodes (TorchScript style)
    seed: int = 0  # for the weights
    widths: tuple[int, ...] = field(default=(), compare=False)  # width of each value, input first

    @property
    def rank(self) -> int:
        return 2 if self.rows is None else 3


def draw_program(choices: Choices, *, max_steps: int = 6, torch_form: bool = False) -> Program:
    """A random program. ``torch_form`` leaves out what only ONNX spells (Gemm, Constant nodes)."""
    dtype = choices.choice(("float32", "float32", "float16", "float64"))
    batch = choices.choice((2, "batch", 1, 3))
    rows = choices.choice((None, 3, 4, 1))
    width = choices.choice((8, 12, 16, 6, 24, 4, 32))
    opset = choices.choice((18, 17, 20))
    widths = [width]
    steps = []
    for _ in range(choices.integer(1, max_steps)):
        current = len(widths) - 1
        source = current if chance(choices, 80) else choices.integer(0, current)
        block = _draw_block(choices, widths, source, rows, dtype, torch_form)
        steps.append(Step(block, source))
        widths.append(_out_width(block, widths[source]))
    extra = tuple(sorted({choices.integer(1, len(widths) - 1) for _ in range(choices.integer(0, 2))}))
    extra = tuple(i for i in extra if i != len(widths) - 1)
    return Program(
        dtype,
        batch,
        rows,
        width,
        tuple(steps),
        extra,
        opset,
        constants_as_nodes=not torch_form and chance(choices, 30),
        seed=choices.integer(0, 1000),
        widths=tuple(widths),
    )


def _out_width(block: Block, width: int) -> int:
    if isinstance(block, Linear):
        return block.out_width
    if isinstance(block, Norm) and block.head is not None:
        return block.head
    return width


def _draw_block(
    choices: Choices, widths: list[int], source: int, rows, dtype: str, torch_form: bool
) -> Block:
    width = widths[source]
    kind = choices.choice(("split", "norm", "act", "arith", "linear", "views", "residual", "parallel"))
    same_width = [i for i, w in enumerate(widths) if w == width and i != source]
    if kind == "split":
        block = _draw_split(choices, width, rows)
        if block is not None:
            return block
        kind = "act"
    if kind == "norm":
        residual = choices.choice(same_width) if same_width and chance(choices, 30) else None
        return Norm(
            choices.choice(("layer", "rms")),
            choices.choice(
                ("op", "pow_div", "mul_reciprocal", "var_mean")
                if torch_form
                else ("op", "pow_div", "mul_reciprocal")
            ),
            choices.choice((1e-5, 1e-6, 0.0)),
            chance(choices, 70),
            chance(choices, 50),
            residual,
            _draw_act(choices, dtype) if chance(choices, 70) else None,
            head := choices.choice((None, None, 4, 8, 16)),
            choices.choice((None, "relu", "tanh", "sigmoid")) if head else None,
        )
    if kind == "arith":
        op = choices.choice(("mul", "add", "sub", "div"))
        return Arith(op, chance(choices, 50), op in ("add", "mul") and chance(choices, 30))
    if kind == "linear":
        gemm = not torch_form and rows is None and chance(choices, 30)
        return Linear(choices.choice((width, 8, 16, 12)), chance(choices, 70), gemm)
    if kind == "views":
        factors = [f for f in (2, 3, 4) if width % f == 0]
        view = choices.choice(("reshape_pair", "unsqueeze_reshape", "noop_reshape"))
        if view == "reshape_pair" and not factors:
            view = "noop_reshape"
        return Views(view, choices.choice(factors) if factors else 1)
    if kind == "residual" and same_width:
        return Residual(choices.choice(same_width))
    if kind == "parallel":
        return Parallel(choices.integer(2, 4), _draw_chain(choices, dtype, norm_ok=True))
    return _draw_act(choices, dtype)


def _draw_act(choices: Choices, dtype: str) -> Act:
    kind = choices.choice(ACTIVATIONS)
    return Act(kind, kind in SPELLED_OUT and chance(choices, 60))


def _draw_chain(choices: Choices, dtype: str, norm_ok: bool) -> tuple[PieceOp, ...]:
    chain = []
    for _ in range(choices.integer(1, 3)):
        kind = choices.choice(PIECE_OPS if norm_ok else PIECE_OPS[:3])
        chain.append(PieceOp(kind, choices.choice(("tanh", "relu", "sigmoid")), chance(choices, 50)))
    return tuple(chain)


def _draw_split(choices: Choices, width: int, rows: int | None) -> Split | None:
    rank = 2 if rows is None else 3
    axes = [rank - 1] + ([1] if rows is not None and rows > 1 else [])
    axis = choices.choice(axes)
    size = width if axis == rank - 1 else rows
    counts = [n for n in (2, 4, 3, 8, 16) if size % n == 0 and n <= size]
    if not counts:
        return None
    pieces = choices.choice(counts)
    source = choices.choice(("split", "split_even", "slice", "gather"))
    if source == "gather" and pieces != size:
        source = "split"  # gathers take single positions: only when the axis is as long as the count
    # A norm over the piece's last axis is only the same op on every piece when the cut is elsewhere,
    # or when it is along the last axis (each piece normalized on its own, as the seed does).
    chain = _draw_chain(choices, "float32", norm_ok=source != "gather" or axis != rank - 1)
    combine = choices.choice(("concat", "stack", "stack_first"))
    near_miss = choices.choice((None, None, None, "uneven", "differ", "leak", "covered"))
    uneven = near_miss == "uneven" and source in ("split", "slice") and size // pieces > 1
    differ = choices.integer(0, pieces - 1) if near_miss == "differ" else None
    leak = choices.integer(0, pieces - 1) if near_miss == "leak" else None
    covered = pieces - 1 if near_miss == "covered" and source == "slice" and pieces > 2 else None
    if uneven or covered:
        combine = "concat"  # stacking needs equal pieces
    return Split(pieces, axis, source, chain, combine, uneven, differ, leak, covered)
