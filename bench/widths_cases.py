"""The cases of bench/bench_widths.py: one op at one shape, dtype, affine and activation; its tensors
(several sets of inputs and outputs, shared parameters), its float64 reference on a sample of rows, the
check every implementation passes before it is timed, and the torch implementations (graphopt's
Triton JIT launch and a module for ``torch.compile``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bench.bench_kernels import relative_error, sample_rows
from graphopt.fused import NORM_ACT, NORM_ACT_LINEAR, Activation, Norm
from graphopt.fused.norm_act.triton_kernel import launch_norm_act, norm_act_config
from graphopt.fused.norm_act_linear.triton_kernel import launch_norm_act_linear, norm_act_linear_config
from graphopt.kernels.launch_rules import Tier

OPS = ("norm_act", "add_norm_act", "norm_act_linear", "add_norm_act_linear")
ACTIVATIONS = tuple(a.attr for a in Activation)
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Relative error (norm-wise) allowed against float64; the largest element error may be 10x that.
TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}
TORCH_ACT = {
    "identity": lambda h: h, "relu": F.relu, "tanh": torch.tanh, "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"), "silu": F.silu, "sigmoid": torch.sigmoid,
}  # fmt: skip


@dataclass(frozen=True)
class Case:
    op: str
    dtype: str
    D: int
    rows: int
    affine: bool
    activation: str
    k: int = 4  # NormActLinear's output features
    eps: float = 1e-5

    @property
    def linear(self) -> bool:
        return self.op.endswith("linear")

    @property
    def residual(self) -> bool:
        return self.op.startswith("add_")

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def bytes_moved(self) -> int:
        """Bytes one call must read and write: X (and the residual) in, Y (and the sum) out, the
        parameters once."""
        e = self.torch_dtype.itemsize
        per_row = self.D + (self.k if self.linear else self.D) + (2 * self.D if self.residual else 0)
        params = (2 * self.D if self.affine else 0) + (self.k * self.D + self.k if self.linear else 0)
        return (self.rows * per_row + params) * e

    def launch_tier(self) -> Tier:
        """The launch tier graphopt's rule picks (the C++ launcher of the ORT library applies the
        same rule to the same table, so both runtimes run this variant for aligned buffers)."""
        if self.linear:  # (the cases' operands are shared by all rows)
            return norm_act_linear_config(self.rows, self.D, self.dtype, uniform=0).tier
        return norm_act_config(self.rows, self.D, self.dtype).tier


class Data:
    """``sets`` sets of inputs (x, residual) and preallocated outputs (y, sum); shared scale, bias,
    weight and linear bias; the float64 reference of the sampled rows of set 0."""

    def __init__(self, case: Case, sets: int, device: torch.device, seed: int = 0):
        # (drawn on the device: the largest cells' inputs take seconds to draw on the host)
        gen = torch.Generator(device=device).manual_seed(seed)
        dt, d, rows = case.torch_dtype, case.D, case.rows

        def randn(*shape, scale=1.0, shift=0.0):
            return (torch.randn(*shape, generator=gen, device=device) * scale + shift).to(dt)

        self.case = case
        self.params: dict[str, torch.Tensor] = {}
        if case.affine:
            self.params["scale"], self.params["bias"] = randn(d, scale=0.2, shift=1.0), randn(d, scale=0.2)
        if case.linear:
            self.params["weight"] = randn(case.k, d, scale=d**-0.5)
            self.params["linear_bias"] = randn(case.k, scale=0.2)
        # X with an offset (statistics around the mean are tested) and a visible spread.
        self.inputs = [{"x": randn(rows, d, scale=2.0, shift=0.5)} for _ in range(sets)]
        if case.residual:
            for s in self.inputs:
                s["residual"] = randn(rows, d)
        y_cols = case.k if case.linear else d
        self.outputs = [
            {"y": torch.empty(rows, y_cols, device=device, dtype=dt)}
            | ({"sum": torch.empty(rows, d, device=device, dtype=dt)} if case.residual else {})
            for _ in range(sets)
        ]
        self.idx = sample_rows(rows)
        self.reference = self._reference()

    def _reference(self) -> tuple[np.ndarray, ...]:
        c, p = self.case, self.params

        def f64(t):
            return None if t is None else t.detach().double().cpu().numpy()

        x = f64(self.inputs[0]["x"][self.idx.to(self.inputs[0]["x"].device)])
        r = f64(self.inputs[0]["residual"][self.idx.to(self.inputs[0]["x"].device)]) if c.residual else None
        scale, bias = f64(p.get("scale")), f64(p.get("bias"))
        attrs = {"norm": "layer", "activation": c.activation, "epsilon": c.eps}
        if c.linear:
            y = NORM_ACT_LINEAR.reference(x, scale, bias, f64(p["weight"]), f64(p["linear_bias"]), r,
                                          out_activation="identity", **attrs)  # fmt: skip
            return (y, x + r) if c.residual else (y,)
        y, s = NORM_ACT.reference(x, scale, bias, r, axis=-1, **attrs)
        return (y, s) if c.residual else (y,)

    def feeds(self, i: int) -> dict[str, torch.Tensor]:
        return self.inputs[i] | self.params


class Checker:
    """NaN-poisons an implementation's outputs and compares them, on the sampled rows, with the
    float64 reference (the first output, and the residual sum where there is one)."""

    def __init__(self, data: Data):
        self.data = data

    @staticmethod
    def _tuple(outputs) -> tuple[torch.Tensor, ...]:
        return outputs if isinstance(outputs, (tuple, list)) else (outputs,)

    def poison(self, outputs) -> None:
        for t in self._tuple(outputs):
            t.fill_(float("nan"))

    def check(self, outputs) -> str | None:
        tol = TOLERANCE[self.data.case.torch_dtype]
        idx = self.data.idx
        for name, out, ref in zip(("y", "sum"), self._tuple(outputs), self.data.reference, strict=False):
            sample = out[idx.to(out.device)]
            if not bool(torch.isfinite(sample).all()) and np.isfinite(ref).all():
                return f"{name}: non-finite values (unwritten or wrong)"
            rel, max_rel = relative_error(sample, ref)
            if not (rel <= tol and max_rel <= 10 * tol):
                return f"{name}: relative error {rel:.2e} (largest {max_rel:.2e}), tolerance {tol:g}"
        return None


class NoCheck:
    """For copies: nothing to judge."""

    def poison(self, outputs) -> None:
        pass

    def check(self, outputs) -> str | None:
        return None


def graphopt_torch_calls(data: Data, at: list[int]) -> list:
    """graphopt's Triton kernel through its JIT launcher, one call per entry of ``at`` (a set index)."""
    c, p = data.case, data.params
    act = Activation.parse(c.activation)

    def call(i):
        x, out = data.inputs[i]["x"], data.outputs[i]
        r, s = data.inputs[i].get("residual"), out.get("sum")
        if c.linear:
            launch_norm_act_linear(
                x, p.get("scale"), p.get("bias"), p["weight"], p["linear_bias"], out["y"], norm=Norm.LAYER,
                activation=act, out_activation=Activation.IDENTITY, eps=c.eps, residual2d=r, residual_sum=s,
            )  # fmt: skip
        else:
            launch_norm_act(x, p.get("scale"), p.get("bias"), r, out["y"], s, norm=Norm.LAYER,
                            activation=act, eps=c.eps)  # fmt: skip
        return tuple(out.values())

    return [lambda i=i: call(i) for i in at]


class Unfused(nn.Module):
    """The same computation as PyTorch ops, for torch.compile: [x + r →] layer norm → activation
    [→ linear]; returns y (and the sum)."""

    def __init__(self, case: Case, params: dict[str, torch.Tensor]):
        super().__init__()
        self.case, self.act = case, TORCH_ACT[case.activation]
        for name, t in params.items():
            self.register_buffer(name, t)
        self.has_affine = case.affine

    def forward(self, x, residual=None):
        s = x + residual if residual is not None else x
        scale = self.scale if self.has_affine else None
        bias = self.bias if self.has_affine else None
        h = self.act(F.layer_norm(s, (self.case.D,), scale, bias, self.case.eps))
        y = F.linear(h, self.weight, self.linear_bias) if self.case.linear else h
        return (y, s) if residual is not None else y


def compiled_calls(data: Data, at: list[int]) -> list:
    """``torch.compile`` (default mode) of ``Unfused``; compiled afresh for each case (otherwise later
    shapes hit dynamo's recompile limit and run eagerly, or get compiled with dynamic shapes)."""
    torch._dynamo.reset()
    compiled = torch.compile(Unfused(data.case, data.params))

    def call(i):
        with torch.no_grad():
            return compiled(data.inputs[i]["x"], data.inputs[i].get("residual"))

    return [lambda i=i: call(i) for i in at]
