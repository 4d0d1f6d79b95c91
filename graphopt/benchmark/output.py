"""The benchmark's table (text), record (JSON) and chart (PNG)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def table(result: dict[str, Any]) -> str:
    rows = result["rows"]
    eager = next((r["start_to_finish_us"] for r in rows if r["variant"] == "eager PyTorch"), None)
    roofline = result["roofline_us"]
    header = (
        f"{'variant':<50} {'model':<9} {'start-to-finish µs':>18} {'GPU µs':>8} {'speedup':>8} "
        f"{'× roofline':>10} {'max abs err':>11}"
    )
    lines = [
        f"{result['device']} · torch {result['torch']} · HBM roofline {roofline:.1f} µs "
        f"({result['bytes_moved'] / 1e6:.1f} MB at {result['copy_bandwidth_TBps']} TB/s)",
        header,
        "-" * len(header),
    ]
    for row in rows:
        if row["error"]:
            lines.append(f"{row['variant']:<50} {row['model']:<9} failed: {row['error']}")
            continue
        s2f, gpu = row["start_to_finish_us"], row["gpu_us"]
        speedup = f"{eager / s2f:.1f}×" if eager and s2f else "-"
        over = f"{gpu / roofline:.2f}" if gpu else "-"
        gpu_text = f"{gpu:.1f}" if gpu else "-"
        lines.append(
            f"{row['variant']:<50} {row['model']:<9} {s2f:>18.1f} {gpu_text:>8} {speedup:>8} {over:>10} "
            f"{row['max_abs_error']:>11.2e}"
        )
    floors = result.get("floors_us")
    if floors:
        lines.append("")
        lines.append("runtime floors (start-to-finish of one op on four floats, same run):")
        lines += [f"  {label:<48} {_floor(value)}" for label, value in floors.items()]
    return "\n".join(lines)


def _floor(value) -> str:
    return f"{value:>8.1f} µs" if isinstance(value, int | float) else f"not measured: {value}"


def write(result: dict[str, Any], folder: Path, stem: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / f"{stem}.json", folder / f"{stem}.txt"]
    written[0].write_text(json.dumps(result, indent=2) + "\n")
    written[1].write_text(table(result) + "\n")
    chart = _chart(result, folder / f"{stem}.png")
    return written + ([chart] if chart else [])


def _chart(result: dict[str, Any], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in result["rows"] if not r["error"]]
    labels = [r["variant"] for r in rows]
    figure, axis = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.5))
    positions = range(len(rows))
    axis.barh(
        [p + 0.2 for p in positions], [r["start_to_finish_us"] for r in rows], 0.4, label="start-to-finish"
    )
    axis.barh([p - 0.2 for p in positions], [r["gpu_us"] or 0 for r in rows], 0.4, label="GPU time")
    axis.axvline(result["roofline_us"], color="k", linestyle="--", linewidth=1, label="HBM roofline")
    axis.set_yticks(list(positions), labels)
    axis.invert_yaxis()
    axis.set_xscale("log")
    axis.set_xlabel("µs per call (log scale)")
    axis.set_title(f"{result.get('model', 'model')} on {result['device']}")
    axis.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
