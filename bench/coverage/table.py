"""The coverage results as a Markdown page: one summary table, the ORT comparison, and details per row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .ort_fusions import BIAS_ACTS, GROUP_NORMS, SKIP_GROUP_NORMS

FINDINGS = Path(__file__).with_name("findings.md")

# Rows whose status is the whole story: nothing was optimized.
NOT_OPTIMIZED = ("export failed", "export skipped", "failed")
PATH_LABELS = {
    "onnx_dynamo": "ONNX dynamo",
    "onnx_torchscript": "ONNX TorchScript",
    "torch_export": "torch.export",
}


def markdown(results: dict[str, Any]) -> str:
    rows = results["rows"]
    lines = [
        "# graphopt on real architectures",
        "",
        f"Run on {results['date']}, {results['machine']}; {results['versions']}.",
        f"Reproduce with `{results['command']}` (see `bench/coverage/__init__.py`).",
        "",
        "Every model is built from its library with a small config and random weights (norm weights drawn",
        "at random too), exported three ways, and optimized by `graphopt.optimize` with its numeric check",
        "on: `ok` means the optimized model's outputs match the original's within the per-dtype tolerance.",
        "",
        "| model | export path | status | nodes before → after | fusions (rule × count) | near misses "
        "| optimize s | max abs error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(_summary_row(row))
    lines += ["", _tally(rows)]
    lines += ["", "## Norm fusions: graphopt against ONNX Runtime's transformer optimizer", ""]
    lines += _ort_section(rows)
    if FINDINGS.exists():
        lines += ["", FINDINGS.read_text().strip()]
    if results.get("pictures"):
        lines += ["", "## Pictures", ""]
        lines += [
            "`graphopt show ORIGINAL --optimized OPTIMIZED -o PICTURE.svg` for each row; the fused regions "
            "before (left) and after (right), with their neighbours:",
            "",
        ]
        lines += [f"- [{p['model']} / {PATH_LABELS[p['path']]}]({p['file']})" for p in results["pictures"]]
    lines += ["", "## Details", ""]
    for row in rows:
        lines += _details(row)
    return "\n".join(lines) + "\n"


def _summary_row(row: dict[str, Any]) -> str:
    path = PATH_LABELS[row["path"]]
    if row["status"] in NOT_OPTIMIZED:
        reason = _cell(row.get("error", ""))
        return f"| {row['model']} | {path} | **{row['status']}**: {reason} | | | | | |"
    fusions = ", ".join(f"{rule} × {count}" for rule, count in sorted(row["fusions"].items())) or "none"
    misses = row["near_misses"]["count"]
    error = row["max_abs_error"]
    status = row["status"]
    if row.get("guard") and row["guard"]["problems"]:
        status = f"**{status}**: " + _cell("; ".join(row["guard"]["problems"]))
    return (
        f"| {row['model']} | {path} | {status} | {row['nodes_before']} → {row['nodes_after']} "
        f"| {_cell(fusions)} | {misses} | {row['optimize_seconds']:.2f} "
        f"| {'' if error is None else f'{error:.2g}'} |"
    )


def _tally(rows: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    listed = ", ".join(f"{status} {n}" for status, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (
        f"{len(rows)} rows ({len({r['model'] for r in rows})} models): {listed}. A guard checks what the "
        "numeric check does not see (bench/coverage/guards.py): ONNX Runtime's own optimized graph of "
        "the optimized model is no larger, and computes the same with and without graphopt's op library; "
        "an optimized .pt2 loads, runs and keeps its parameters."
    )


def _ort_section(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "ORT's optimizer (`onnxruntime.transformers.optimizer.optimize_model`, `opt_level=0`) on the same",
        "ONNX files. *norms*: LayerNormalization and SimplifiedLayerNormalization nodes, with or without a",
        "residual; *residual*: SkipLayerNormalization / SkipSimplifiedLayerNormalization (residual add +",
        "norm), which graphopt writes as `graphopt.NormAct` with a residual input (a norm of constants,",
        "which graphopt computes once while optimizing, is not required of it); *bias + GELU*: BiasGelu",
        "and FastGelu, which graphopt writes as `graphopt.AffineAct`; *group norms*: GroupNorm and",
        "SkipGroupNorm (residual), which graphopt writes as `graphopt.GroupNormAct` (its residual has the",
        "input's shape; SkipGroupNorm's may also be one value per sample and channel). ORT's other fusions",
        "(attention, EmbedLayerNormalization) have no graphopt op.",
        "",
        "| model | export path | ORT model_type | ORT norms / residual | graphopt norms / residual | "
        "ORT / graphopt bias + GELU | ORT / graphopt group norms (residual) | graphopt ≥ ORT "
        "| ORT's other fusions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ort = row.get("ort")
        if not ort:
            continue
        if "error" in ort:
            lines.append(
                f"| {row['model']} | {PATH_LABELS[row['path']]} | {ort.get('model_type', '')} "
                f"| failed: {_cell(ort['error'])} | | | | | |"
            )
            continue
        ours = row.get("norms") or {"norms": 0, "skip_norms": 0}
        checks = ort["comparison"].items()
        short = [k[:-3].replace("_", " ") for k, v in checks if k.endswith("_ok") and not v]
        verdict = "yes" if ort["comparison"]["ok"] else f"**no**: {', '.join(short)}"
        others = ", ".join(
            f"{k} × {v}"
            for k, v in sorted(ort["fused"].items())
            if "LayerNormalization" not in k and k not in (*BIAS_ACTS, *GROUP_NORMS, *SKIP_GROUP_NORMS)
        )
        lines.append(
            f"| {row['model']} | {PATH_LABELS[row['path']]} | {ort['model_type']} "
            f"| {_ort_norms(ort)} / {ort['skip_norms']} | {ours['norms']} / {ours['skip_norms']} "
            f"| {ort.get('bias_acts', '?')} / {ours.get('bias_acts', '?')} | {_group_norms(ort, ours)} "
            f"| {verdict} "
            f"| {others or '-'} |"
        )
    return lines


def _group_norms(ort: dict[str, Any], ours: dict[str, Any]) -> str:
    if not ort.get("group_norms") and not ours.get("group_norms"):
        return "-"
    return (
        f"{ort.get('group_norms', '?')} ({ort.get('skip_group_norms', '?')}) / "
        f"{ours.get('group_norms', '?')} ({ours.get('skip_group_norms', '?')})"
    )


def _ort_norms(ort: dict[str, Any]) -> str:
    constant = ort.get("constant_norms", 0)
    return f"{ort['norms']} ({constant} of constants)" if constant else str(ort["norms"])


def _details(row: dict[str, Any]) -> list[str]:
    title = f"{row['model']} / {PATH_LABELS[row['path']]}: {row['status']}"
    body = [f"<details><summary>{title}</summary>", ""]
    if row["status"] in NOT_OPTIMIZED:
        body += ["```", row.get("error", ""), "```"]
    else:
        rules = ", ".join(f"{rule} × {count}" for rule, count in sorted(row["rules"].items()))
        body += [
            f"- export {row['export_seconds']:.1f} s, optimize {row['optimize_seconds']:.2f} s "
            f"(passes {row['pass_seconds']:.2f} s); check: {row['verification']}",
            f"- every rule: {rules or 'none'}",
            f"- near misses: {row['near_misses']['count']}",
        ]
        if row.get("guard"):
            guard = row["guard"]
            figures = {k: v for k, v in guard.items() if k not in ("ok", "problems")}
            body += [f"- guard: {'ok' if guard['ok'] else '; '.join(guard['problems'])} {figures or ''}"]
        body += [f"  - {_cell(example)}" for example in row["near_misses"]["examples"]]
    return [*body, "", "</details>", ""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
