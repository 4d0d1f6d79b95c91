"""The bytes graphopt writes for every bundled and zoo model, as sha256 digests.

A change that should not change behaviour (a move of modules, a renamed helper) must leave every digest
as it was: run this before and after it and compare. Each model is written by ``graphopt.optimize``
with the numeric check on (a model the check refuses records the error instead of a digest), into a
temporary folder; the digest covers every file written (an ONNX model's external data included; of a
.pt2 archive, every entry but what torch.export randomizes in each process).

    python bench/layout_bytes.py                       # writes bench/results/layout_bytes.json
    python bench/layout_bytes.py --compare bench/results/layout_bytes.json   # exit 1 on a difference
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import onnx  # noqa: E402

import graphopt  # noqa: E402
from models import zoo  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "layout_bytes.json"


# torch.export.save writes two things that differ from one process to the next whatever the program:
# a random serialization id, and the id() of the graph each node came from in its provenance.
_RANDOM_ENTRY = "serialization_id"
_GRAPH_ID = re.compile(rb'(graph_id\\*"\s*:\s*)\d+')


def _placed(data: bytes) -> bytes:
    """The exporters record the source file of each op (the zoo's modules): the checkout's folder
    is blanked there, so that two checkouts in different folders compare."""
    return data.replace(str(ROOT / "models").encode(), b"ROOT/models")


def _placed_strings(message) -> None:
    """``_placed`` on every string field of a protobuf message, in place (a byte-level replace would
    leave the length prefixes of the old text)."""
    for field, value in message.ListFields():
        if field.type == field.TYPE_MESSAGE:
            for item in value if _repeated(field) else [value]:
                _placed_strings(item)
        elif field.type == field.TYPE_STRING:
            if _repeated(field):
                value[:] = [_placed(v.encode()).decode() for v in value]
            else:
                setattr(message, field.name, _placed(value.encode()).decode())


def _repeated(field) -> bool:
    if hasattr(field, "is_repeated"):  # (protobuf 6 and newer)
        return field.is_repeated
    return field.label == field.LABEL_REPEATED


def _contents(path: Path) -> bytes:
    """The file's bytes, with the checkout's folder blanked where the exporters recorded it; for a
    .pt2 archive, its entries with what torch randomizes blanked out too."""
    if path.suffix == ".onnx":
        model = onnx.load(path, load_external_data=False)
        _placed_strings(model)
        return model.SerializeToString(deterministic=True)
    if path.suffix != ".pt2":
        return path.read_bytes()
    parts = []
    with zipfile.ZipFile(path) as archive:
        for name in sorted(archive.namelist()):
            data = b"" if name.endswith(_RANDOM_ENTRY) else _GRAPH_ID.sub(rb"\g<1>0", archive.read(name))
            parts.append(name.encode() + b"\0" + hashlib.sha256(_placed(data)).digest())
    return b"".join(parts)


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        digest.update(path.name.encode() + b"\0" + _contents(path))
    return digest.hexdigest()


def _written(model, suffix: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out"
        out.mkdir()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                graphopt.optimize(model, output=out / f"model{suffix}")
        except Exception as error:  # (recorded: a refusal must stay the same refusal)
            return f"error: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        return _digest(out)


def digests() -> dict[str, str]:
    found = {}
    for path in sorted((ROOT / "models").glob("*.onnx")) + sorted((ROOT / "models").glob("*.pt2")):
        found[f"models/{path.name}"] = _written(str(path), path.suffix)
        print(path.name, found[f"models/{path.name}"], file=sys.stderr)
    for entry in zoo.all_entries():
        suffix = ".onnx" if entry.kind == "onnx" else ".pt2"
        found[f"zoo/{entry.name}"] = _written(entry.build(), suffix)
        print(entry.name, found[f"zoo/{entry.name}"], file=sys.stderr)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--compare", type=Path, help="a JSON written before: exit 1 where a digest differs")
    args = parser.parse_args()
    found = digests()
    if args.compare is not None:
        before = json.loads(args.compare.read_text())["digests"]
        differ = sorted(k for k in before.keys() | found.keys() if before.get(k) != found.get(k))
        for key in differ:
            print(f"differs: {key}: {before.get(key)} → {found.get(key)}")
        print(f"{len(found) - len(differ)} equal, {len(differ)} differ")
        return 1 if differ else 0
    args.output.write_text(json.dumps({"models": len(found), "digests": found}, indent=1) + "\n")
    print(f"{len(found)} models → {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
