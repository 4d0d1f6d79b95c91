"""GroupNormAct on ONNX Runtime's CPU EP (the custom-op library's kernel) against the graph both ONNX
exporters write for group norm + SiLU (Reshape → InstanceNormalization → Reshape → Mul → Add →
Sigmoid → Mul), run by ONNX Runtime itself, one intra-op thread, float32; timed as
``bench_norm_act_cpu.py`` times NormAct.

    PYTHONPATH=. python bench/bench_group_norm_act_cpu.py [--shapes 1x320x32x32,...] [--groups 32]
        [--library NAME=PATH ...] [--rounds 15] [--out DIR] [--name NAME]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_norm_act_cpu import (
    channel_affine,
    common_options,
    libraries_of,
    run_case,
    session,
    write_record,
)
from graphopt.fused import DOMAIN, DOMAIN_VERSION


def model(shape: tuple[int, ...], groups: int, fused: bool):
    n, c = shape[:2]
    scale, bias = channel_affine(c)
    io = [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)) for name in ("X", "Y")]
    if fused:
        inits = [numpy_helper.from_array(scale, "S"), numpy_helper.from_array(bias, "B")]
        nodes = [
            helper.make_node(
                "GroupNormAct", ["X", "S", "B"], ["Y"], domain=DOMAIN, groups=groups, activation="silu"
            )
        ]
        opsets = [helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    else:
        trailing = [c] + [1] * (len(shape) - 2)
        inits = [
            numpy_helper.from_array(np.array([n, groups, -1], np.int64), "grouped"),
            numpy_helper.from_array(np.array(shape, np.int64), "shape"),
            numpy_helper.from_array(np.ones(groups, np.float32), "ones"),
            numpy_helper.from_array(np.zeros(groups, np.float32), "zeros"),
            numpy_helper.from_array(scale.reshape(trailing), "S"),
            numpy_helper.from_array(bias.reshape(trailing), "B"),
        ]
        nodes = [
            helper.make_node("Reshape", ["X", "grouped"], ["g"]),
            helper.make_node("InstanceNormalization", ["g", "ones", "zeros"], ["i"], epsilon=1e-5),
            helper.make_node("Reshape", ["i", "shape"], ["r"]),
            helper.make_node("Mul", ["r", "S"], ["m"]),
            helper.make_node("Add", ["m", "B"], ["a"]),
            helper.make_node("Sigmoid", ["a"], ["sg"]),
            helper.make_node("Mul", ["a", "sg"], ["Y"]),
        ]
        opsets = [helper.make_opsetid("", 18)]
    return helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:], inits), opset_imports=opsets)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="1x320x32x32,1x128x64x64,2x64x32x32,1x512x16x16,1x256x32x32")
    p.add_argument("--groups", type=int, default=32)
    common_options(p, "group_norm_act_cpu")
    args = p.parse_args(argv)
    libraries = libraries_of(args)
    cases = []
    for text in args.shapes.split(","):
        shape = tuple(int(v) for v in text.split("x"))
        sessions = {"ort": session(model(shape, args.groups, False), None)}
        sessions |= {name: session(model(shape, args.groups, True), path) for name, path in libraries.items()}
        x = (np.random.default_rng(1).standard_normal(shape) * 2 + 0.5).astype(np.float32)
        times, errors = run_case(sessions, x, args.rounds, text)
        cases.append({"shape": list(shape), "groups": args.groups, "times": times, "max_abs_error": errors})
    write_record(args, argv, "bench/bench_group_norm_act_cpu.py", cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
