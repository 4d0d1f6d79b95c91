"""torch.export archives with a planted pickle: loading one with the full unpickler creates a marker
file (the payload calls ``open(marker, "w")``), so a test sees whether anything unpickled it."""

from __future__ import annotations

import json
import pickle
import zipfile
from pathlib import Path

import torch


class Payload:
    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        return torch.tanh(x * self.weight)


def save_clean(path: Path) -> Path:
    program = torch.export.export(Scale(), (torch.randn(2, 4),))
    torch.export.save(program, path)
    return path


def _rewrite(source: Path, target: Path, change) -> Path:
    """Copies the archive entry by entry; ``change(name, data)`` returns the new data (or None to keep)."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            data = old.read(info)
            new.writestr(info, change(info.filename, data) or data)
    return target


def pickled_weight(folder: Path, marker: Path) -> Path:
    """The weights config says ``use_pickle: true`` and the weight's file is the planted pickle."""
    clean = save_clean(folder / "clean.pt2")

    def change(name: str, data: bytes):
        if name.endswith("_weights_config.json"):
            config = json.loads(data)
            for entry in config["config"].values():
                entry["use_pickle"] = True
            return json.dumps(config).encode()
        if "/data/weights/weight_" in name:
            return pickle.dumps(Payload(marker))
        return None

    return _rewrite(clean, folder / "pickled_weight.pt2", change)


def pickled_constant(folder: Path, marker: Path) -> Path:
    """An opaque Python object among the constants, which torch always unpickles."""
    clean = save_clean(folder / "clean.pt2")
    root = zipfile.ZipFile(clean).namelist()[0].split("/")[0]

    def change(name: str, data: bytes):
        if name.endswith("_constants_config.json"):
            planted = {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True}
            planted["tensor_meta"] = None
            config = {"config": {"planted": planted}}
            return json.dumps(config).encode()
        return None

    target = _rewrite(clean, folder / "pickled_constant.pt2", change)
    with zipfile.ZipFile(target, "a") as archive:
        archive.writestr(f"{root}/data/constants/opaque_obj_0", pickle.dumps(Payload(marker)))
    return target


def pickled_sample_inputs(folder: Path, marker: Path) -> Path:
    """Sample inputs that torch's weights-only unpickler refuses, so torch retries with the full one."""
    clean = save_clean(folder / "clean.pt2")

    def change(name: str, data: bytes):
        return pickle.dumps(Payload(marker)) if "/data/sample_inputs/" in name else None

    return _rewrite(clean, folder / "pickled_inputs.pt2", change)


PLANTED = {"weight": pickled_weight, "constant": pickled_constant, "sample_inputs": pickled_sample_inputs}
