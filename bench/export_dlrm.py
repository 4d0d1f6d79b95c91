"""Writes the DLRM-style model (models/embeddings.py) as ONNX through both exporters, and as a .pt2,
for ``graphopt bench`` on any machine:

    python bench/export_dlrm.py --out OUT [--n 32] [--batch 512] [--d 64] [--variant sum|mean|weighted]
    graphopt bench OUT/dlrm_sum_dynamo_32x512x64.onnx --device cpu --no-compile

Files: OUT/dlrm_<variant>_<dynamo|torchscript>_<N>x<B>x<D>.onnx and OUT/dlrm_<variant>_<N>x<B>x<D>.pt2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnx
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models.embeddings import Dlrm, dlrm_inputs
from models.onnx_export import export_dynamo, export_torchscript

VARIANTS = {"sum": ("sum", False), "mean": ("mean", False), "weighted": ("sum", True)}
SMALLEST_VOCAB = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="sum")
    args = parser.parse_args()
    mode, weighted = VARIANTS[args.variant]
    module = Dlrm(args.n, args.d, mode=mode, weighted=weighted, smallest_vocab=SMALLEST_VOCAB).eval()
    inputs = dlrm_inputs(args.n, args.batch, weighted=weighted, smallest_vocab=SMALLEST_VOCAB)
    names = ["dense", *(f"sparse_{i}" for i in range(len(inputs) - 1))]
    stem = f"dlrm_{args.variant}_{{}}{args.n}x{args.batch}x{args.d}"
    args.out.mkdir(parents=True, exist_ok=True)
    onnx.save(export_dynamo(module, inputs), args.out / f"{stem.format('dynamo_')}.onnx")
    model = export_torchscript(module, inputs, input_names=names, output_names=["output"], opset=17)
    onnx.save(model, args.out / f"{stem.format('torchscript_')}.onnx")
    torch.export.save(torch.export.export(module, inputs), args.out / f"{stem.format('')}.pt2")


if __name__ == "__main__":
    main()
