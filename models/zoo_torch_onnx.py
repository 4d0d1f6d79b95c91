"""Zoo entries exported to ONNX from the eager modules, through both `torch.onnx.export` paths."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import torch

from models.onnx_export import DEFAULT_OPSET, export_dynamo, export_torchscript
from models.zoo_entry import ZooEntry
from models.zoo_specs import SPECS, ModuleSpec, spec


def _dynamic_shapes(s: ModuleSpec) -> dict | None:
    if not s.dynamic_axes:
        return None
    return {
        name: {axis: torch.export.Dim(label) for axis, label in axes.items()}
        for name, axes in s.dynamic_axes.items()
    }


def _make_dynamo(s: ModuleSpec, opset: int) -> Callable[[], onnx.ModelProto]:
    return lambda: export_dynamo(s.module(), s.args(), opset=opset, dynamic_shapes=_dynamic_shapes(s))


def _make_torchscript(s: ModuleSpec, opset: int) -> Callable[[], onnx.ModelProto]:
    def make() -> onnx.ModelProto:
        axes = dict(s.dynamic_axes or {})
        if axes:
            # Every spec with a dynamic input keeps that axis through to its output.
            axes["output"] = next(iter(axes.values()))
        return export_torchscript(
            s.module(), s.args(), input_names=s.input_names, opset=opset, dynamic_axes=axes or None
        )

    return make


def _feed(s: ModuleSpec) -> Callable[[], dict[str, np.ndarray]]:
    return lambda: {name: t.numpy() for name, t in zip(s.input_names, s.args(), strict=True)}


def _eager_outputs(s: ModuleSpec) -> Callable[[], list[np.ndarray]]:
    def run() -> list[np.ndarray]:
        with torch.no_grad():
            out = s.module()(*s.args())
        return [t.numpy() for t in (out if isinstance(out, tuple | list) else (out,))]

    return run


def _entry(
    s: ModuleSpec, exporter: str, opset: int = DEFAULT_OPSET, suffix: str = "", *extra: str
) -> ZooEntry:
    make = _make_dynamo(s, opset) if exporter == "dynamo" else _make_torchscript(s, opset)
    return ZooEntry(
        name=f"{s.name}.{exporter}{suffix}",
        make=make,
        make_inputs=_feed(s),
        tags=s.tags | {"onnx", exporter, f"opset{opset}", *extra},
        make_expected=_eager_outputs(s),
    )


def _variants() -> list[ZooEntry]:
    """Older or newer opsets, where the exporters spell the same module with different ops."""
    return [
        # Below opset 17 no LayerNormalization: ReduceMean, Sub, Pow, ReduceMean, Add(eps), Sqrt, Div.
        _entry(spec("split_stack"), "torchscript", 16, "_opset16", "decomposed_layer_norm"),
        # Below opset 20 there is no Gelu: Div, Erf, Add, Mul, Mul.
        _entry(spec("mlp_ln_gelu"), "dynamo", 18, "_opset18", "decomposed_gelu"),
        # (a spelled GELU between transposes, as speech models export at opset 17)
        _entry(spec("audio_features"), "torchscript", 17, "_opset17", "decomposed_gelu"),
        # Opset 23 adds RMSNormalization and Attention.
        _entry(spec("mlp_rms_silu"), "dynamo", 23, "_opset23"),
        _entry(spec("attention_sdpa"), "dynamo", 23, "_opset23"),
    ]


def entries() -> list[ZooEntry]:
    made = [
        _entry(s, exporter)
        for s in SPECS
        for exporter in ("dynamo", "torchscript")
        if exporter in s.exporters
    ]
    return made + _variants()
