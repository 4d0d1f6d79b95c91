"""Runs the coverage table: python -m bench.coverage [--models ...] [--paths ...] (see __init__.py)."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import logging
import os
import platform
import shutil
import sys
import warnings
from pathlib import Path

from .architectures import BUILDERS, build
from .exports import PATHS, export
from .guards import check
from .ort_fusions import compare, ort_fusions
from .record import error_line, optimize_file
from .table import markdown

REPO = Path(__file__).resolve().parents[2]
# (an exporter that cannot take a model is a row, and no failure of graphopt's)
EXPORT_FAILURES = ("export failed", "export skipped")
log = logging.getLogger("coverage")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.coverage", description=__doc__)
    parser.add_argument("--models", nargs="*", choices=sorted(BUILDERS), default=list(BUILDERS))
    parser.add_argument("--paths", nargs="*", choices=PATHS, default=list(PATHS))
    parser.add_argument(
        "--work", type=Path, default=REPO / "out" / "coverage", help="exported models go here"
    )
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--no-pictures", action="store_true")
    parser.add_argument("--table-only", action="store_true", help="rewrite coverage.md from coverage.json")
    args = parser.parse_args(argv)
    if args.table_only:
        results = json.loads((args.results / "coverage.json").read_text())
        (args.results / "coverage.md").write_text(markdown(results))
        return 0
    # ORT's optimizer logs every fusion through loggers named after its modules: keep only errors.
    logging.basicConfig(level=logging.ERROR, format="%(message)s")
    log.setLevel(logging.INFO)
    warnings.simplefilter("ignore")

    rows, pictures = [], []
    pictures_dir = args.results / "coverage"
    for name in args.models:
        for path in args.paths:
            # A fresh module (the same seeded weights) for each exporter: an export may leave state on
            # the module, and after TorchScript's export of transformers' Swin, torch.export of the same
            # module failed on a guard it passes on a fresh one.
            architecture = build(name)
            row = {"model": name, "library": architecture.library, "path": path}
            folder = args.work / name
            if path in architecture.skip_paths:
                row.update(status="export skipped", error=architecture.skip_paths[path])
                rows.append(row)
                log.info("%-22s %-17s export skipped: %s", name, path, row["error"])
                continue
            try:
                exported, seconds = export(architecture, path, folder)
            except Exception as error:  # an exporter that cannot take the model is a row, not a crash
                row.update(status="export failed", error=error_line(error, 300))
                rows.append(row)
                log.info("%-22s %-17s export failed: %s", name, path, row["error"])
                continue
            row["export_seconds"] = round(seconds, 2)
            optimized = folder / f"{exported.stem}.opt{exported.suffix}"
            optimized.unlink(missing_ok=True)  # a failed run must not leave a stale one to draw
            row.update(optimize_file(exported, optimized))
            if row["status"] == "ok":
                row["guard"] = check(exported, optimized, architecture.args, row["notes"])
                if not row["guard"]["ok"]:
                    row["status"] = "guard failed"
            if exported.suffix == ".onnx" and architecture.ort_model_type and row["status"] != "failed":
                row["ort"] = _ort(exported, architecture, row)
            if not args.no_pictures:
                # A row that failed to optimize still gets a picture: the exported graph as it came.
                picture = _picture(exported, optimized, pictures_dir / f"{name}.{path}.svg", args.results)
                row["picture"] = picture
                if picture.get("file"):
                    pictures.append({"model": name, "path": path, "file": picture["file"]})
            rows.append(row)
            log.info(
                "%-22s %-17s %s %s → %s nodes, %.2f s",
                name,
                path,
                row["status"],
                row.get("nodes_before"),
                row.get("nodes_after"),
                row.get("optimize_seconds", 0),
            )

    results = {
        "date": datetime.date.today().isoformat(),
        "machine": _machine(),
        "versions": _versions(),
        "command": " ".join(["python -m bench.coverage", *(sys.argv[1:] if argv is None else argv)]),
        "rows": rows,
        "pictures": pictures,
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "coverage.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (args.results / "coverage.md").write_text(markdown(results))
    log.info("wrote %s", args.results / "coverage.md")
    bad = [r for r in rows if r["status"] not in ("ok", *EXPORT_FAILURES)]
    return 1 if bad else 0


def _ort(exported: Path, architecture, row: dict) -> dict:
    options = {"hidden_size": 0, **architecture.ort_options}
    try:
        ort = ort_fusions(exported, architecture.ort_model_type, options)
    except Exception as error:  # ORT's optimizer gives up on some graphs; the row says so
        return {"model_type": architecture.ort_model_type, "error": f"{type(error).__name__}: {error}"[:200]}
    ort["comparison"] = compare(ort, row["norms"])
    return ort


def _picture(original: Path, optimized: Path, target: Path, results: Path) -> dict:
    from graphopt.picture import render

    try:
        drawn = render(original, target, optimized=optimized if optimized.exists() else None)
    except Exception as error:  # a picture that fails is reported in the table
        return {"error": f"{type(error).__name__}: {error}"[:200]}
    # Relative to the results folder, where coverage.md (which links it) is written.
    return {"file": os.path.relpath(drawn.path, results), "engine": drawn.engine}


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}, no GPU used"


def _versions() -> str:
    import importlib.metadata as metadata

    names = ("torch", "torchvision", "transformers", "onnx", "onnxruntime", "onnxscript")
    found = []
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{name} {metadata.version(name)}")
    dot = "Graphviz dot" if shutil.which("dot") else "matplotlib"
    return ", ".join([f"Python {platform.python_version()}", *found]) + f"; pictures by {dot}"


if __name__ == "__main__":
    sys.exit(main())
