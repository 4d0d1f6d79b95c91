"""The table (text), record (JSON) and chart (PNG) of ``graphopt bench`` on any model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphopt.files.atomic import atomic_target, write_text_atomic
from graphopt.printable import NAME_LIMIT, printable


def table(result: dict[str, Any]) -> str:
    rows = result["rows"]
    first = next((r["start_to_finish_us"] for r in rows if r["start_to_finish_us"]), None)
    header = (
        f"{'row':<48} {'model':<13} {'start-to-finish µs':>18} {'noise ±':>8} {'GPU µs':>9} {'vs first':>8} "
        f"{'max abs err':>11}"
    )
    # (input names and runtime errors come from the model: shown with their control characters escaped)
    inputs = ", ".join(
        f"{printable(k, NAME_LIMIT)} {v['dtype']}{v['shape']}" for k, v in result.get("inputs", {}).items()
    )
    lines = [
        f"{printable(result['model'])} on {result['device']} ({result['date']}); inputs: {inputs}",
        header,
    ]
    lines.append("-" * len(header))
    for row in rows:
        if row["error"]:
            lines.append(f"{row['variant']:<48} {row['model']:<13} {printable(row['error'])}")
            continue
        s2f, gpu, error = row["start_to_finish_us"], row["gpu_us"], row["max_abs_error"]
        ratio = f"{first / s2f:.2f}×" if first and s2f else "-"
        gpu_text = f"{gpu:.1f}" if gpu else "-"
        error_text = f"{error:.2e}" if error is not None else "-"
        noise = row.get("noise")
        noise_text = f"{100 * noise:.1f}%" if noise is not None else "-"
        lines.append(
            f"{row['variant']:<48} {row['model']:<13} {s2f:>18.1f} {noise_text:>8} {gpu_text:>9} {ratio:>8} "
            f"{error_text:>11}"
        )
    return "\n".join(lines)


def write(result: dict[str, Any], folder: Path, stem: str) -> list[Path]:
    """The record, table and chart in ``folder``, each written under a temporary name and renamed (a
    link already at a file's name is replaced, not followed)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / f"{stem}.json", folder / f"{stem}.txt"]
    write_text_atomic(written[0], json.dumps(result, indent=2) + "\n")
    write_text_atomic(written[1], table(result) + "\n")
    chart = chart_png(result["rows"], f"{result['model']} on {result['device']}", folder / f"{stem}.png")
    return written + ([chart] if chart else [])


def chart_png(rows: list[dict], title: str, path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in rows if not r["error"]]
    if not rows:
        return None
    figure, axis = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.5))
    positions = list(range(len(rows)))
    axis.barh(
        [p + 0.2 for p in positions], [r["start_to_finish_us"] for r in rows], 0.4, label="start-to-finish"
    )
    if any(r["gpu_us"] for r in rows):
        axis.barh([p - 0.2 for p in positions], [r["gpu_us"] or 0 for r in rows], 0.4, label="GPU time")
    axis.set_yticks(positions, [r["variant"] for r in rows])
    axis.invert_yaxis()
    axis.set_xscale("log")
    axis.set_xlabel("µs per call (log scale)")
    axis.set_title(printable(title), parse_math=False)
    axis.legend(loc="lower right")
    figure.tight_layout()
    with atomic_target(path) as temp:
        figure.savefig(temp, dpi=120, format="png")
    plt.close(figure)
    return path
