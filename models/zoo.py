"""The test model zoo: varied small models, each built on first use and cached for the process.

    from models import zoo
    for entry in zoo.onnx_models():           # ZooEntry(name, tags, build(), inputs(), expected(), save(dir))
        model = entry.build()                 # an onnx.ModelProto (a fresh copy each call)
    ep = zoo.get("split_stack.export").build()   # a torch.export.ExportedProgram
    zoo.with_tags("layer_norm", kind="onnx")

Names are `<model>.<source>`: `dynamo` and `torchscript` (the two torch.onnx.export paths, opset 20 unless
the name says otherwise), `helper` (built with onnx.helper), `export` and `export_decomposed`
(torch.export, before and after `run_decompositions()`).
"""

from __future__ import annotations

import functools

from models import zoo_export, zoo_handmade, zoo_torch_onnx
from models.zoo_entry import ZooEntry

__all__ = ["ZooEntry", "all_entries", "exported_programs", "get", "names", "onnx_models", "with_tags"]


@functools.cache
def _registry() -> dict[str, ZooEntry]:
    entries = zoo_torch_onnx.entries() + zoo_handmade.entries() + zoo_export.entries()
    registry = {e.name: e for e in entries}
    assert len(registry) == len(entries), "zoo entry names must be unique"
    return registry


def all_entries() -> list[ZooEntry]:
    return list(_registry().values())


def onnx_models() -> list[ZooEntry]:
    return [e for e in all_entries() if e.kind == "onnx"]


def exported_programs() -> list[ZooEntry]:
    return [e for e in all_entries() if e.kind == "torch_export"]


def names() -> list[str]:
    return list(_registry())


def get(name: str) -> ZooEntry:
    try:
        return _registry()[name]
    except KeyError:
        raise KeyError(f"no zoo entry {name!r}; known: {', '.join(sorted(_registry()))}") from None


def with_tags(*tags: str, kind: str | None = None) -> list[ZooEntry]:
    """Entries carrying every one of `tags`, optionally only of one kind ("onnx" or "torch_export")."""
    return [e for e in all_entries() if set(tags) <= e.tags and (kind is None or e.kind == kind)]
