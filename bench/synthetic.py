"""Synthetic ONNX graphs of a chosen node count that look like exported models, for scaling benchmarks.

    from bench.synthetic import make_synthetic
    model = make_synthetic(50_000, seed=0)        # exactly 50,000 nodes, a few seconds at most

    python bench/synthetic.py 20000 --seed 0 --out synthetic_20k.onnx

The graph maps x[batch, width] to y[batch, width] through a random sequence of blocks, each the shape an
exporter emits for a common module:
- pre-norm MLP with residual: LayerNormalization, MatMul, Add, activation, MatMul, Add, Add;
- the seed's split → per-slice chain → stack: Split, per slice Reshape, LayerNormalization(eps=0), Tanh,
  Unsqueeze, then Concat, Transpose, Reshape, Add (what a horizontal-fusion pass batches);
- split → per-slice scale, bias and activation → Concat on the split axis;
- LayerNorm spelled out (the TorchScript exporter below opset 17), with Constant nodes for its scalars;
- RMSNorm spelled out (the dynamo exporter below opset 23).
Weights are small (width×width) and scaled so activations stay bounded however deep the graph is.
Remaining nodes after the last whole block are single activations.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 20
IR_VERSION = 10
ACTIVATIONS = ("Relu", "Tanh", "Sigmoid", "Gelu")
LARGEST_BLOCK = 64  # no block emits more nodes than this; below it we pad with single activations


class _Builder:
    """Accumulates nodes and initializers with unique names; each block maps one value to another."""

    def __init__(self, seed: int, width: int, batch: int | str):
        self.rng = np.random.default_rng(seed)
        self.width = width
        # Reshapes spell the batch as the exporters do: a literal when static, -1 when symbolic.
        self.batch_in_shape = batch if isinstance(batch, int) else -1
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._shared: dict[str, str] = {}
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def node(self, op: str, inputs: list[str], n_outputs: int = 1, **attributes) -> list[str]:
        outputs = [self.name(op.lower()) for _ in range(n_outputs)]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=self.name(f"node_{op}"), **attributes))
        return outputs

    def one(self, op: str, inputs: list[str], **attributes) -> str:
        return self.node(op, inputs, **attributes)[0]

    def weight(self, array: np.ndarray, hint: str = "w") -> str:
        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def shared(self, key: str, make: Callable[[], np.ndarray]) -> str:
        """One initializer per key (axes, shapes, ones), shared as the dynamo exporter shares constants."""
        if key not in self._shared:
            self._shared[key] = self.weight(make(), "const")
        return self._shared[key]

    def constant(self, array: np.ndarray) -> str:
        """A Constant node per use: how the TorchScript exporter spells scalars."""
        return self.one("Constant", [], value=numpy_helper.from_array(array))

    def matrix(self, rows: int, cols: int) -> np.ndarray:
        return (self.rng.standard_normal((rows, cols)) * (0.5 / np.sqrt(rows))).astype(np.float32)

    def vector(self, size: int, scale: float = 0.1, center: float = 0.0) -> np.ndarray:
        return (center + self.rng.standard_normal(size) * scale).astype(np.float32)


def _layer_norm(b: _Builder, x: str, width: int, eps: float = 1e-5) -> str:
    scale = b.weight(b.vector(width, center=1.0), "ln_scale")
    bias = b.weight(b.vector(width), "ln_bias")
    return b.one("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)


def _activation(b: _Builder, x: str) -> str:
    op = ACTIVATIONS[b.rng.integers(len(ACTIVATIONS))]
    return b.one(op, [x])


def mlp_block(b: _Builder, x: str) -> str:
    w, hidden = b.width, 2 * b.width
    h = b.one("MatMul", [_layer_norm(b, x, w), b.weight(b.matrix(w, hidden))])
    h = _activation(b, b.one("Add", [h, b.weight(b.vector(hidden), "bias")]))
    h = b.one("MatMul", [h, b.weight(b.matrix(hidden, w))])
    h = b.one("Add", [h, b.weight(b.vector(w), "bias")])
    return b.one("Add", [x, h])


def split_stack_block(b: _Builder, x: str) -> str:
    k = int(b.rng.choice([2, 4, 8]))
    piece = b.width // k
    shape = b.shared(f"shape_{piece}", lambda: np.array([b.batch_in_shape, piece], np.int64))
    axis0 = b.shared("axes_0", lambda: np.array([0], np.int64))
    ones = b.shared(f"ones_{piece}", lambda: np.ones(piece, np.float32))
    stacked = []
    for part in b.node("Split", [x], k, axis=1, num_outputs=k):
        viewed = b.one("Reshape", [part, shape], allowzero=1)
        normed = b.one("LayerNormalization", [viewed, ones], axis=-1, epsilon=1e-5)
        stacked.append(b.one("Unsqueeze", [b.one("Tanh", [normed]), axis0]))
    whole = b.one("Concat", stacked, axis=0)
    flat = b.one(
        "Reshape",
        [
            b.one("Transpose", [whole], perm=[1, 0, 2]),
            b.shared(f"shape_{b.width}", lambda: np.array([b.batch_in_shape, b.width], np.int64)),
        ],
    )
    return b.one("Add", [x, flat])


def split_concat_block(b: _Builder, x: str) -> str:
    k = int(b.rng.choice([2, 4, 8]))
    piece = b.width // k
    outputs = []
    for part in b.node("Split", [x], k, axis=1, num_outputs=k):
        scaled = b.one("Mul", [part, b.weight(b.vector(piece, center=1.0), "scale")])
        outputs.append(_activation(b, b.one("Add", [scaled, b.weight(b.vector(piece), "bias")])))
    return b.one("Concat", outputs, axis=1)


def decomposed_layer_norm_block(b: _Builder, x: str) -> str:
    axes = b.shared("axes_-1", lambda: np.array([-1], np.int64))
    mean = b.one("ReduceMean", [x, axes])
    centered = b.one("Sub", [x, mean])
    variance = b.one("ReduceMean", [b.one("Pow", [centered, b.constant(np.array(2.0, np.float32))]), axes])
    std = b.one("Sqrt", [b.one("Add", [variance, b.constant(np.array(1e-5, np.float32))])])
    normed = b.one("Div", [centered, std])
    scaled = b.one("Mul", [normed, b.weight(b.vector(b.width, center=1.0), "ln_scale")])
    return b.one("Add", [scaled, b.weight(b.vector(b.width), "ln_bias")])


def decomposed_rms_norm_block(b: _Builder, x: str) -> str:
    axes = b.shared("axes_-1", lambda: np.array([-1], np.int64))
    two = b.shared("two", lambda: np.array(2.0, np.float32))
    eps = b.shared("eps_1e-6", lambda: np.array(1e-6, np.float32))
    mean_square = b.one("ReduceMean", [b.one("Pow", [x, two]), axes])
    inverse = b.one("Reciprocal", [b.one("Sqrt", [b.one("Add", [mean_square, eps])])])
    normed = b.one("Mul", [x, inverse])
    gated = b.one("Mul", [normed, b.weight(b.vector(b.width, center=1.0), "rms_scale")])
    return b.one("Mul", [gated, b.one("Sigmoid", [gated])])


# Weights favour the blocks real models are mostly made of.
BLOCKS: tuple[tuple[Callable[[_Builder, str], str], float], ...] = (
    (mlp_block, 0.35),
    (split_stack_block, 0.25),
    (split_concat_block, 0.15),
    (decomposed_layer_norm_block, 0.15),
    (decomposed_rms_norm_block, 0.10),
)


def make_synthetic(n_nodes: int, seed: int = 0, *, width: int = 16, batch: int | str = 2) -> onnx.ModelProto:
    """A valid opset-20 model with exactly `n_nodes` top-level nodes; input x[batch, width] (float32).

    `batch` may be a name for a symbolic dimension. Then every Reshape(-1, ...) mints a fresh unknown dim,
    as in real dynamic-batch exports, and ONNX Runtime's session creation grows quadratically with them
    (about 20 s at 5,000 nodes): keep it static where the graph is to be run.
    """
    if n_nodes < 1:
        raise ValueError(f"n_nodes must be at least 1, got {n_nodes}")
    if width % 8:
        raise ValueError(f"width must be a multiple of 8 (splits go up to 8 pieces), got {width}")
    b = _Builder(seed, width, batch)
    blocks, weights = zip(*BLOCKS, strict=True)
    probabilities = np.array(weights) / sum(weights)
    x = "x"
    while n_nodes - len(b.nodes) > LARGEST_BLOCK:
        x = blocks[b.rng.choice(len(blocks), p=probabilities)](b, x)
    while len(b.nodes) < n_nodes:
        x = _activation(b, x)
    graph = helper.make_graph(
        b.nodes,
        f"synthetic_{n_nodes}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, width])],
        b.initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="graphopt-bench"
    )
    model.ir_version = IR_VERSION
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a synthetic ONNX graph of a given node count.")
    parser.add_argument("n_nodes", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    onnx.save_model(make_synthetic(args.n_nodes, args.seed, width=args.width, batch=args.batch), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
