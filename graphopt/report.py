"""What an optimization did, as data (JSON) and as tables for people."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from .pipeline import PassReport
from .printable import NAME_LIMIT, rich_text


@dataclass
class Report:
    source: str
    frontend: str
    passes: list[PassReport]
    ops_before: dict[str, int]
    ops_after: dict[str, int]
    traffic_before: int
    traffic_after: int
    output: str | None = None
    verification: dict[str, Any] | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Top-level nodes of the written ONNX graph, where that differs from the IR's count: an op the
    # target opset lacks (Gelu before opset 20, RMSNormalization before 23) is written as its formula.
    nodes_written: int | None = None
    speed: dict[str, Any] | None = None  # the speed guard's figures (optimize --measure)

    @property
    def nodes_before(self) -> int:
        return sum(self.ops_before.values())

    @property
    def nodes_after(self) -> int:
        return sum(self.ops_after.values())

    @property
    def nodes_in_output(self) -> int:
        """Nodes of the model graphopt returns (for ONNX, top-level nodes of the written graph)."""
        return self.nodes_after if self.nodes_written is None else self.nodes_written

    @property
    def rule_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for step in self.passes:
            for rule, count in step.counts.items():
                counts[rule] = counts.get(rule, 0) + count
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "versions": versions(),
            "source": self.source,
            "frontend": self.frontend,
            "output": self.output,
            "speed": self.speed,
            "nodes": {
                "before": self.nodes_before,
                "after": self.nodes_after,
                "written": self.nodes_in_output,
            },
            "ops": {"before": self.ops_before, "after": self.ops_after},
            "estimated_traffic_bytes": {
                "before": self.traffic_before,
                "after": self.traffic_after,
                "saved": self.traffic_before - self.traffic_after,
            },
            "passes": [
                {
                    "name": p.name,
                    "skipped": p.skipped,
                    "counts": p.counts,
                    "near_misses": [
                        {"rule": m.rule, "node": m.node, "reason": m.reason} for m in p.near_misses
                    ],
                    "seconds": round(p.seconds, 6),
                    "nodes_before": p.nodes_before,
                    "nodes_after": p.nodes_after,
                    "notes": p.notes,
                }
                for p in self.passes
            ],
            "verification": self.verification,
            "seconds": {k: round(v, 6) for k, v in self.seconds.items()},
            "notes": self.notes,
        }


def versions() -> dict[str, str | None]:
    """graphopt's version and those of the libraries and Python it ran with (None: not installed), for
    a report attached to a bug."""
    import importlib.metadata
    import platform

    from . import __version__

    found: dict[str, str | None] = {"graphopt": __version__, "python": platform.python_version()}
    for name, distributions in _LIBRARIES.items():
        module = sys.modules.get(name)
        found[name] = getattr(module, "__version__", None) if module is not None else None
        for distribution in distributions if found[name] is None else ():
            try:
                found[name] = importlib.metadata.version(distribution)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return found


# module: the distributions that provide it (ONNX Runtime comes as a CPU or a GPU package)
_LIBRARIES = {
    "torch": ("torch",),
    "onnx": ("onnx",),
    "onnxruntime": ("onnxruntime", "onnxruntime-gpu"),
    "triton": ("triton",),
}


def render(report: Report, console, *, near_miss_limit: int = 20) -> None:
    """Prints the report's tables on a rich Console. What comes from the model (names, op types, the
    notes and reasons that quote them) is shown as printable text, its markup escaped."""
    from rich.table import Table

    # Titles are lines of their own: a table's title wraps at the table's width, however long the path.
    console.print(f"graphopt: {rich_text(report.source)}", soft_wrap=True, highlight=False)
    passes = Table()
    for column in ("pass", "rule", "count", "nodes", "ms"):
        passes.add_column(column, justify="right" if column in ("count", "ms") else "left")
    for step in report.passes:
        nodes = f"{step.nodes_before} → {step.nodes_after}"
        rules = sorted(step.counts.items()) or [("-", 0)]
        for i, (rule, count) in enumerate(rules):
            first = i == 0
            passes.add_row(
                step.name if first else "",
                rich_text(rule),
                str(count) if count else "",
                nodes if first else "",
                f"{step.seconds * 1e3:.1f}" if first else "",
            )
    console.print(passes)

    console.print("nodes by op")
    ops = Table()
    for column in ("op", "before", "after"):
        ops.add_column(column, justify="left" if column == "op" else "right")
    for name in sorted(set(report.ops_before) | set(report.ops_after), key=op_display_name):
        before, after = report.ops_before.get(name, 0), report.ops_after.get(name, 0)
        if before != after:
            ops.add_row(rich_text(op_display_name(name), NAME_LIMIT), str(before), str(after))
    ops.add_row("[bold]total[/bold]", str(report.nodes_before), str(report.nodes_after))
    console.print(ops)
    if report.nodes_written is not None:
        console.print(
            f"the written model has {report.nodes_written} nodes: ops that its opset lacks (such as "
            "Gelu before opset 20) are written as their formulas"
        )

    misses = [m for step in report.passes for m in step.near_misses]
    if misses:
        console.print(f"near misses ({len(misses)})")
        table = Table()
        for column in ("rule", "node", "reason"):
            table.add_column(column)
        for miss in misses[:near_miss_limit]:
            table.add_row(rich_text(miss.rule), rich_text(miss.node, NAME_LIMIT), rich_text(miss.reason))
        if len(misses) > near_miss_limit:
            table.add_row("…", f"{len(misses) - near_miss_limit} more", "see --report-json")
        console.print(table)

    saved = report.traffic_before - report.traffic_after
    console.print(
        f"estimated memory traffic: {_bytes(report.traffic_before)} → {_bytes(report.traffic_after)}"
        f" ({_bytes(saved)} saved per run)"
    )
    if report.verification is not None:
        v = report.verification
        status = "[green]outputs match[/green]" if v.get("ok") else "[red]OUTPUTS DIFFER[/red]"
        console.print(f"numeric check: {status} ({rich_text(v.get('summary', ''))})")
    for note in report.notes:
        console.print(f"note: {rich_text(note)}")
    if report.output:
        console.print(f"wrote {rich_text(report.output)}")


def op_display_name(op: str) -> str:
    """An op as people read it, in tables and pictures alike: ``layer_norm`` → LayerNorm, and a fused op
    by its name in the graphopt domain (``graphopt.NormActLinear``, as an ONNX model holds it)."""
    from .picture.labels import FUSED_IR_OPS, op_title

    return f"graphopt.{op_title(op)}" if op in FUSED_IR_OPS else op_title(op)


def _bytes(count: int) -> str:
    sign = "-" if count < 0 else ""
    count = abs(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{sign}{count:.0f} {unit}" if unit == "B" else f"{sign}{count:.1f} {unit}"
        count /= 1024
    return f"{sign}{count} B"
