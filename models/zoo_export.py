"""Zoo entries that are `torch.export` programs, as exported and after `run_decompositions()`.

The two differ in ways the torch frontend must handle: `linear` becomes `permute` + `addmm`, `layer_norm`
becomes `native_layer_norm` + `getitem`, `split` becomes `split_with_sizes`, `stack` becomes `cat` + `view`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from models.zoo_entry import ZooEntry
from models.zoo_specs import SPECS, ModuleSpec


def _dynamic_shapes(s: ModuleSpec) -> dict | None:
    if not s.dynamic_axes:
        return None
    return {
        name: {axis: torch.export.Dim(label, min=2) for axis, label in axes.items()}
        for name, axes in s.dynamic_axes.items()
    }


def _export(s: ModuleSpec) -> torch.export.ExportedProgram:
    return torch.export.export(s.module(), s.args(), dynamic_shapes=_dynamic_shapes(s))


def _eager_outputs(s: ModuleSpec) -> Callable[[], list[torch.Tensor]]:
    def run() -> list[torch.Tensor]:
        with torch.no_grad():
            out = s.module()(*s.args())
        return list(out) if isinstance(out, tuple | list) else [out]

    return run


def entries() -> list[ZooEntry]:
    made: list[ZooEntry] = []
    for s in SPECS:
        if "torch_export" not in s.exporters:
            continue
        tags = s.tags | {"torch_export"}
        exported = ZooEntry(
            f"{s.name}.export", lambda s=s: _export(s), s.args, tags | {"aten_export"}, _eager_outputs(s)
        )
        # Decomposing a copy of the cached export saves exporting twice.
        decomposed = ZooEntry(
            f"{s.name}.export_decomposed",
            lambda exported=exported: exported.build().run_decompositions(),
            s.args,
            tags | {"aten_decomposed"},
            _eager_outputs(s),
        )
        made += [exported, decomposed]
    return made
