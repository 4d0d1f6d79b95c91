"""AffineAct along the channel axis of NCHW maps (a batch norm folded to a scale and shift, then an
activation) on ONNX Runtime's CPU EP (the custom-op library's kernel) against the graph it replaces,
Mul → Add → activation (SiLU as Sigmoid and Mul), run by ONNX Runtime itself, one intra-op thread,
float32; timed as ``bench_norm_act_cpu.py`` times NormAct.

    PYTHONPATH=. python bench/bench_affine_act_cpu.py [--shapes 1x64x56x56,...] [--activations relu,silu]
        [--library NAME=PATH ...] [--rounds 15] [--out DIR] [--name NAME]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench.bench_norm_act_cpu as cpu_bench
from graphopt.fused import DOMAIN, DOMAIN_VERSION


def model(shape: tuple[int, ...], activation: str, fused: bool):
    c = shape[1]
    scale, bias = cpu_bench.channel_affine(c)
    io = [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)) for name in ("X", "Y")]
    if fused:
        inits = [numpy_helper.from_array(scale, "S"), numpy_helper.from_array(bias, "B")]
        attrs = {"activation": activation, "axis": 1}
        nodes = [helper.make_node("AffineAct", ["X", "S", "B"], ["Y"], domain=DOMAIN, **attrs)]
        opsets = [helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    else:
        trailing = [c] + [1] * (len(shape) - 2)
        inits = [
            numpy_helper.from_array(scale.reshape(trailing), "S"),
            numpy_helper.from_array(bias.reshape(trailing), "B"),
        ]
        nodes = [helper.make_node("Mul", ["X", "S"], ["m"]), helper.make_node("Add", ["m", "B"], ["a"])]
        if activation == "silu":
            nodes += [helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["a", "s"], ["Y"])]
        else:
            nodes.append(helper.make_node(activation.capitalize(), ["a"], ["Y"]))
        opsets = [helper.make_opsetid("", 18)]
    return helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:], inits), opset_imports=opsets)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="1x64x56x56,1x256x14x14,8x128x28x28,1x512x7x7,4x96x28x28")
    p.add_argument("--activations", default="relu,silu")
    cpu_bench.common_options(p, "affine_act_cpu")
    args = p.parse_args(argv)
    libraries = cpu_bench.libraries_of(args)
    cases = []
    for act in args.activations.split(","):
        for text in args.shapes.split(","):
            shape = tuple(int(v) for v in text.split("x"))
            sessions = {"ort": cpu_bench.session(model(shape, act, False), None)}
            sessions |= {
                name: cpu_bench.session(model(shape, act, True), path) for name, path in libraries.items()
            }
            x = (np.random.default_rng(1).standard_normal(shape) * 2).astype(np.float32)
            times, errors = cpu_bench.run_case(sessions, x, args.rounds, f"{act} {text}")
            cases.append({"activation": act, "shape": list(shape), "times": times, "max_abs_error": errors})
    cpu_bench.write_record(args, argv, "bench/bench_affine_act_cpu.py", cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
