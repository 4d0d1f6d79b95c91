"""Reports of bench/bench_widths.py: the JSON record (rewritten after every case, so a run stopped
by a timeout still leaves a valid file), a markdown table and a heat map of graphopt's time over
the fastest copy of the same bytes.

    python bench/widths_report.py bench/results/widths.json   # markdown and picture again from a record
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

TARGET = 1.10  # the most graphopt may take over the fastest copy of the same bytes


def ratio(a, b) -> float | None:
    return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else None


def diagnose(cell: dict, tier, sms: int) -> str:
    """The facts a cell that misses the target is to be explained from (an automatic note, to be
    replaced by a measured explanation): how much of the padded block is real columns, the values
    each thread holds, how many programs each SM gets, and how far the copy itself is
    from the roofline (short rows cost a copy too)."""
    d, rows = cell["D"], cell["rows"]
    used = d / tier.block_n if not tier.looped else 1.0
    per_thread = tier.block_m * tier.block_n / (32 * tier.num_warps)
    programs = math.ceil(rows / tier.rows_per_program)
    parts = [f"auto: {cell['vs_copy']:.2f}x copy", f"tier {tier.name}"]
    if used < 1:
        parts.append(f"{used:.0%} of the block's lanes are columns ({d} of {tier.block_n})")
    parts.append(f"{per_thread:g} values/thread")
    # (programs per SM, not waves: several small programs share an SM at once)
    parts.append(f"{programs} programs, {programs / max(sms, 1):.1f} per SM")
    copy_roof = ratio(cell.get("copy_us"), cell.get("roofline_us"))
    if copy_roof:
        parts.append(f"the copy is {copy_roof:.2f}x the roofline")
    timed = {k: v for k, v in cell.get("candidates", {}).items() if isinstance(v, float)}
    best = min(timed.items(), key=lambda kv: kv[1], default=None)
    if best and cell.get("copy_us"):
        parts.append(f"best candidate {best[0]}: {best[1] / cell['copy_us']:.2f}x copy")
    return "; ".join(parts)


def finish(cell: dict, m: dict, copies: dict, device, tier) -> None:
    """Fills in the cell's times and ratios (and its explanation where it misses the target)."""
    copy_us = {k: round(v["us"], 2) for k, v in copies.items() if "us" in v}
    cell["copy_methods"] = copy_us | {k: f"error: {v['error']}" for k, v in copies.items() if "error" in v}
    cell["copy_us"] = min(copy_us.values()) if copy_us else None
    cell["us"] = round(m["us"], 2) if "us" in m else None
    cell["timing"] = m.get("timing")
    if "error" in m:
        cell.setdefault("errors", {})["graphopt"] = m["error"]
    cell["vs_copy"] = ratio(cell["us"], cell["copy_us"])
    cell["vs_roofline"] = ratio(cell["us"], cell["roofline_us"])
    cell["vs_torch_compile"] = ratio(cell["us"], cell["torch_compile_us"])
    if cell["runtime"] == "ort":
        cell["vs_ort_native"] = ratio(cell["us"], cell.get("ort_native_us"))
    if cell["vs_copy"] is not None and cell["vs_copy"] > TARGET:
        cell["explanation"] = diagnose(cell, tier, device.sms)
    if not cell["notes"]:
        del cell["notes"]
    # The record's documented fields first, in their order; the rest after.
    first = ("op", "runtime", "dtype", "D", "rows", "affine", "activation", "us", "copy_us", "roofline_us",
             "torch_compile_us", "explanation")  # fmt: skip
    ordered = {k: cell.pop(k) for k in first if k in cell}
    ordered.update(cell)
    cell.clear()
    cell.update(ordered)


def versions() -> dict:
    import torch
    import triton

    found = {"torch": torch.__version__, "triton": triton.__version__}
    try:
        import onnxruntime

        found["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    return found


def write_json(path: Path, record: dict) -> None:
    """Atomically: a reader (or a run killed mid-write) never sees half a file."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, path)


def _num(v, digits=1) -> str:
    return f"{v:.{digits}f}" if isinstance(v, (int, float)) else "-"


COLUMNS = ("op", "runtime", "dtype", "D", "rows", "affine", "act", "µs", "copy µs", "×copy", "roofline µs",
           "×roof", "torch.compile µs", "×compile", "ORT own µs", "tier", "explanation")  # fmt: skip


def _row(c: dict) -> list[str]:
    compile_us = c.get("torch_compile_us")
    if compile_us is None:
        compile_us = c.get("notes", {}).get("torch_compile", "-")
    native = c.get("ort_native_us", c.get("notes", {}).get("ort_native", "")) if c["runtime"] == "ort" else ""
    us = c.get("us")
    if us is None:
        us = "error: " + "; ".join(f"{k}: {v}" for k, v in c.get("errors", {}).items())
    d = f"{c['D']}*" if c.get("off_grid") else str(c["D"])
    return [
        c["op"], c["runtime"], c["dtype"], d, str(c["rows"]), "yes" if c["affine"] else "no", c["activation"],
        _num(us), _num(c.get("copy_us")), _num(c.get("vs_copy"), 2), _num(c.get("roofline_us")),
        _num(c.get("vs_roofline"), 2), _num(compile_us), _num(c.get("vs_torch_compile"), 2),
        _num(native), c.get("tier", ""), c.get("explanation", ""),
    ]  # fmt: skip


def progress_line(c: dict) -> str:
    """One line per cell for the log."""

    def f(v, fmt=".1f"):
        return format(v, fmt) if isinstance(v, (int, float)) else "-"

    errors = f" ERRORS {c['errors']}" if c.get("errors") else ""
    native = f", ORT own {f(c.get('ort_native_us'))}" if c["runtime"] == "ort" else ""
    where = f"{c['op']} {c['runtime']} {c['dtype']} D={c['D']} rows={c['rows']} affine={int(c['affine'])}"
    times = f"{f(c['us'])} µs = {f(c['vs_copy'], '.2f')}x copy ({f(c['copy_us'])})"
    return (
        f"{where} {c['activation']}: {times}, {f(c['vs_roofline'], '.2f')}x roofline, "
        f"compile {f(c['torch_compile_us'])}{native}{errors}"
    )


def markdown(record: dict) -> str:
    cells = record["cells"]
    timed = [c for c in cells if c.get("vs_copy") is not None]
    met = [c for c in timed if c["vs_copy"] <= TARGET]
    slower = [c for c in cells if (c.get("vs_torch_compile") or 0) > 1.0]
    lines = [
        f"# Fused kernels across widths ({record['device']}, {record['date']})",
        "",
        f"`{record['command']}`",
        "",
        f"Per-call device time ({record.get('timing', '')}); copy = the fastest device copy of the same "
        f"bytes in the same run; roofline = bytes / {record.get('copy_bandwidth_TBps', '?')} TB/s (a large "
        f"copy). * marks an off-grid width. Target: ≤ {TARGET}× copy and never slower than torch.compile.",
        "",
        f"- cells: {len(cells)} ({len(timed)} timed); ≤ {TARGET}× copy: {len(met)}; "
        f"over: {len(timed) - len(met)}; slower than torch.compile: {len(slower)}",
    ]
    if not record.get("complete", True):
        lines.append(f"- incomplete: {record.get('stopped', 'stopped early')}")
    worst = sorted(timed, key=lambda c: -c["vs_copy"])[:10]
    if worst:
        names = (
            f"{c['op']}/{c['runtime']}/{c['dtype']}/D{c['D']}/r{c['rows']} {c['vs_copy']:.2f}" for c in worst
        )
        lines.append("- worst ×copy: " + ", ".join(names))
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_row(c)) + " |" for c in cells]
    return "\n".join(lines) + "\n"


def heatmap(record: dict, path: Path) -> str:
    """A panel per op (down) and runtime and dtype (across): D down, rows across, each square the
    worst ×copy over the affine and activation variants measured. Returns what was written (or why
    not)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no heat map: matplotlib is not installed"
    cells = [c for c in record["cells"] if c.get("vs_copy") is not None]
    if not cells:
        return "no heat map: no timed cells"
    ops = sorted({c["op"] for c in cells})
    columns = sorted({(c["runtime"], c["dtype"]) for c in cells})
    n_dims = len({c["D"] for c in cells})
    size = (2.3 * len(columns) + 1.2, (0.22 * n_dims + 1.1) * len(ops) + 0.8)
    fig, axes = plt.subplots(len(ops), len(columns), squeeze=False, constrained_layout=True, figsize=size)
    image = None
    for (i, op), (j, (runtime, dtype)) in ((o, rd) for o in enumerate(ops) for rd in enumerate(columns)):
        ax = axes[i][j]
        sel = [c for c in cells if (c["op"], c["runtime"], c["dtype"]) == (op, runtime, dtype)]
        if not sel:
            ax.axis("off")
            continue
        ds, rs = sorted({c["D"] for c in sel}), sorted({c["rows"] for c in sel})
        grid = [[math.nan] * len(rs) for _ in ds]
        for c in sel:
            a, b = ds.index(c["D"]), rs.index(c["rows"])
            grid[a][b] = c["vs_copy"] if math.isnan(grid[a][b]) else max(grid[a][b], c["vs_copy"])
        image = ax.imshow(grid, cmap="RdYlGn_r", vmin=0.9, vmax=1.5, aspect="auto")
        for a, row in enumerate(grid):
            for b, v in enumerate(row):
                if not math.isnan(v):
                    ax.text(b, a, f"{v:.2f}", ha="center", va="center", fontsize=6,
                            fontweight="bold" if v > TARGET else "normal")  # fmt: skip
        ax.set_xticks(range(len(rs)), [str(r) for r in rs], fontsize=6)
        ax.set_yticks(range(len(ds)), [str(d) for d in ds], fontsize=6)
        ax.set_title(f"{op}\n{runtime} · {dtype}", fontsize=7)
        if i == len(ops) - 1:
            ax.set_xlabel("rows", fontsize=6)
        if j == 0:
            ax.set_ylabel("D", fontsize=6)
    fig.suptitle(f"graphopt time / fastest copy of the same bytes (worst over affine × activation; "
                 f"bold: over {TARGET})\n{record['device']}, {record['date']}", fontsize=8)  # fmt: skip
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.5, label="× copy")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"wrote {path}"


def write_reports(record: dict, json_path: Path, picture: bool) -> str:
    json_path.with_suffix(".md").write_text(markdown(record))
    return heatmap(record, json_path.with_suffix(".png")) if picture else ""


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results/widths.json")
    print(write_reports(json.loads(target.read_text()), target, picture=True))
