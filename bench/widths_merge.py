"""Assembles ``bench/results/widths.json`` from bench_widths runs of one lease, and attaches the
measured explanations that Nsight Compute's counters give (``bench/ncu_kernels.py``).

    python bench/widths_merge.py GRID [--override RUN ...] [--compile-from OLD] [--ncu NCU] --out FILE

GRID is a bench_widths record. Each ``--override`` record replaces GRID's cells of the same op,
runtime, dtype, D, rows, affine and activation (a run of the landed code where GRID timed a
candidate). ``--compile-from`` copies ``torch_compile_us`` from an earlier record's matching cells
where GRID skipped torch.compile, naming that record in the cell's notes. ``--ncu`` turns the
automatic note of each cell over the target into an explanation naming the counters measured on
the same kernel: a cell whose op and dtype class has no counters keeps its automatic note.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.widths_report import ratio, write_json, write_reports

KEY = ("op", "runtime", "dtype", "D", "rows", "affine", "activation")


def key(cell: dict) -> tuple:
    return tuple(cell[k] for k in KEY)


def dtype_class(dtype: str) -> str:
    return "fp32" if dtype == "float32" else "16-bit"


def counters_by_class(ncu: dict) -> dict[tuple[str, str], list[dict]]:
    """The profiled kernels by (op, dtype class); the copy rows apart, as the baseline."""
    out: dict[tuple[str, str], list[dict]] = {}
    for row in ncu["results"]:
        op, dtype, *_ = row["case"].split(":")
        out.setdefault((op, dtype_class(dtype)), []).append(row)
    return out


def measured(rows: list[dict], copies: list[dict], source: str) -> str:
    def one(r: dict) -> str:
        _, dtype, d, *k = r["case"].split(":")
        what = f"{dtype} D = {d}" + (f" K = {k[0]}" if k else "")
        return (
            f"{what}: {r['issue_active_pct']:.0f}% of cycles issue an instruction, "
            f"{r['thread_instructions_per_element']:.1f} thread instructions per element, "
            f"DRAM at {r['dram_pct']:.0f}% of peak, occupancy {r['achieved_occupancy_pct']:.0f}%"
        )

    copy = "; ".join(
        f"the copy ({c['case'].split(':')[1]}): {c['issue_active_pct']:.0f}% issue-active, "
        f"{c['thread_instructions_per_element']:.1f} instructions per element"
        for c in copies
    )
    return (
        f"measured on this kernel ({source}): "
        + "; ".join(one(r) for r in rows)
        + (f"; {copy}" if copy else "")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", type=Path)
    parser.add_argument("--override", type=Path, nargs="*", default=[])
    parser.add_argument("--compile-from", type=Path, default=None)
    parser.add_argument("--ncu", type=Path, default=None)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    record = json.loads(args.grid.read_text())
    cells = {key(c): c for c in record["cells"]}
    for path in args.override:
        other = json.loads(path.read_text())
        for cell in other["cells"]:
            if key(cell) in cells:
                cell.setdefault("notes", {})["source"] = f"{path.name} ({other['date']}: {other['command']})"
                cells[key(cell)] = cell
    if args.compile_from:
        old = json.loads(args.compile_from.read_text())
        earlier = {key(c): c for c in old["cells"]}
        for k, cell in cells.items():
            was = earlier.get(k, {}).get("torch_compile_us")
            if cell.get("torch_compile_us") is None and was is not None:
                cell["torch_compile_us"] = was
                cell["vs_torch_compile"] = ratio(cell["us"], was)
                cell.setdefault("notes", {})["torch_compile"] = f"from the record of {old['date']}"
    if args.ncu:
        ncu = json.loads(args.ncu.read_text())
        by_class = counters_by_class(ncu)
        copies = [r for r in ncu["results"] if r["case"].startswith("copy:")]
        source = f"{args.ncu.parent.name}/{args.ncu.name}, {ncu['date']}"
        for cell in cells.values():
            note = cell.get("explanation")
            rows = by_class.get((cell["op"], dtype_class(cell["dtype"])))
            if note and rows:
                cell["explanation"] = (
                    f"{measured(rows, copies, source)}. This cell: {note.removeprefix('auto: ')}"
                )
    record["cells"] = list(cells.values())
    record["assembled"] = " ".join(
        ["python bench/widths_merge.py", *(sys.argv[1:] if argv is None else argv)]
    )
    write_json(args.out, record)
    print(write_reports(record, args.out, picture=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
