"""What the NormActLinear shape probes share (``probe_norm_act_linear_blocks`` and ``_early``): the
kernel launched at a chosen shape, the launch graphopt picks, and the results file.

Every launch is LayerNorm + GELU with scale, bias and linear bias, no residual, identity after the
linear layer. ``ops`` is (x, scale, bias, weight, linear_bias, rows_of): rows_of the (inner, groups) of
per-feature operands, (1, 1) for shared ones.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
from triton import next_power_of_2

from graphopt.fused import Activation, Norm
from graphopt.fused.norm_act_linear.triton_kernel import launch_norm_act_linear, norm_act_linear_kernel
from graphopt.kernels.launch_rules import cdiv

EPS = 1e-5


def launch_shape(ops, y, block_m: int, num_warps: int, blockwise: bool, shared: bool) -> None:
    """The kernel at one (block_m, num_warps), its rows in one block of the next power of two."""
    x, scale, bias, weight, linear_bias, rows_of = ops
    rows, cols = x.shape
    block_n = next_power_of_2(cols)
    per = (1, 1) if shared else rows_of
    norm_act_linear_kernel[(cdiv(rows, block_m), 1, 1)](
        x, x, scale, bias, weight, linear_bias, y, y, rows, cols, weight.shape[-2], x.stride(0), 0,
        EPS, int(Norm.LAYER), int(Activation.GELU), int(Activation.IDENTITY), 1, 1, 1, 0, 0,
        *per, *per, 1, rows, *per, *per,
        BLOCK_M=block_m, BLOCK_N=block_n, LOOPED=False, EVEN=block_n == cols, SHARED=shared,
        BLOCKWISE=blockwise, num_warps=num_warps,
    )  # fmt: skip


def launch_picked(ops, y):
    """The same computation through graphopt's launcher (the tier it picks); returns its config."""
    x, scale, bias, weight, linear_bias, rows_of = ops
    return launch_norm_act_linear(
        x, scale, bias, weight, linear_bias, y, norm=int(Norm.LAYER), activation=int(Activation.GELU),
        out_activation=int(Activation.IDENTITY), eps=EPS, scale_rows=rows_of, bias_rows=rows_of,
        weight_rows=rows_of, linear_bias_rows=rows_of,
    )  # fmt: skip


def write_cells(out: Path, script: str, cells: list[dict]) -> None:
    """The probe's cells as JSON at ``out``, with the device, date and command that measured them."""
    meta = {
        "device": torch.cuda.get_device_name(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch": torch.__version__,
        "command": " ".join([f"python bench/{script}", *sys.argv[1:]]),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "cells": cells}, indent=1))
    print(f"wrote {out}")
