"""bench/widths_merge.py (the widths record assembled from runs of one lease) and
bench/ncu_kernels.py's reading of Nsight Compute's raw CSV page, on made-up records."""

import json

from bench import ncu_kernels, widths_merge


def _cell(op, dtype, d, us, *, compile_us=None, note=None):
    cell = {"op": op, "runtime": "torch", "dtype": dtype, "D": d, "rows": 16384, "affine": True,
            "activation": "gelu", "us": us, "copy_us": 10.0, "roofline_us": 9.0,
            "torch_compile_us": compile_us, "tier": "m1_n1024_w2_row_a_s", "vs_copy": us / 10.0}  # fmt: skip
    if note:
        cell["explanation"] = note
    return cell


def _record(cells, date="2026-01-01 00:00 UTC"):
    return {"device": "GPU", "date": date, "command": "python bench/bench_widths.py",
            "copy_bandwidth_TBps": 3.0, "complete": True, "cells": cells}  # fmt: skip


def _ncu():
    rows = [("copy:bfloat16:768", 16.0, 5.4), ("norm_act:bfloat16:768", 81.0, 46.5)]
    results = [{"case": case, "issue_active_pct": issue, "thread_instructions_per_element": per,
                "dram_pct": 40.0, "achieved_occupancy_pct": 45.0} for case, issue, per in rows]  # fmt: skip
    return {"date": "2026-01-02 00:00 UTC", "results": results}


def test_override_compile_times_and_measured_explanations(tmp_path):
    grid = _record([_cell("norm_act", "bfloat16", 768, 14.0, note="auto: 1.40x copy; tier X"),
                    _cell("norm_act", "float32", 768, 10.5, note="auto: 1.05x copy"),
                    _cell("norm_act_linear", "bfloat16", 768, 40.0, note="auto: 4.00x copy")])  # fmt: skip
    landed = _record([_cell("norm_act", "float32", 768, 10.2)], date="2026-01-01 00:05 UTC")
    old = _record([_cell("norm_act", "bfloat16", 768, 15.0, compile_us=20.0)], date="2025-12-31 00:00 UTC")
    paths = {}
    (tmp_path / "run1").mkdir()
    for name, content in (("grid", grid), ("landed", landed), ("old", old), ("run1/ncu", _ncu())):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(content))
    out = tmp_path / "widths.json"
    argv = [str(paths["grid"]), "--override", str(paths["landed"]), "--compile-from", str(paths["old"]),
            "--ncu", str(paths["run1/ncu"]), "--out", str(out)]  # fmt: skip
    assert widths_merge.main(argv) == 0
    record = json.loads(out.read_text())
    cells = {(c["op"], c["dtype"]): c for c in record["cells"]}
    assert len(cells) == 3 and record["assembled"].startswith("python bench/widths_merge.py")
    # the landed run's cell replaced the grid's, and says where it came from
    assert (
        cells["norm_act", "float32"]["us"] == 10.2
        and "landed.json" in cells["norm_act", "float32"]["notes"]["source"]
    )
    # torch.compile's time carried over, with its ratio and provenance
    bf16 = cells["norm_act", "bfloat16"]
    assert bf16["torch_compile_us"] == 20.0 and bf16["vs_torch_compile"] == 0.7
    assert "2025-12-31" in bf16["notes"]["torch_compile"]
    # counters of the same op and dtype class explain the cell; the cell's own facts follow
    assert bf16["explanation"].startswith(
        "measured on this kernel (run1/ncu.json, 2026-01-02 00:00 UTC): bfloat16 D = 768"
    )
    assert (
        "46.5 thread instructions per element" in bf16["explanation"]
        and "the copy (bfloat16)" in bf16["explanation"]
    )
    assert bf16["explanation"].endswith("This cell: 1.40x copy; tier X")
    # no counters for NormActLinear here: its automatic note stays
    assert cells["norm_act_linear", "bfloat16"]["explanation"] == "auto: 4.00x copy"
    assert (tmp_path / "widths.md").exists() and (tmp_path / "widths.png").exists()


def test_ncu_raw_page_is_read_by_counter_name_and_unit():
    header = ["ID", "Kernel Name", "gpu__time_duration.sum", "sm__inst_executed.sum",
              "smsp__issue_active.avg.pct_of_peak_sustained_active",
              "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio",
              "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"]  # fmt: skip
    units = ["", "", "ns", "inst", "%", "inst", "inst"]
    row = ["0", "norm_act_kernel", "24,288", "393,216", "81.07", "2.89", "1.25"]
    text = "==PROF== Connected\n" + "\n".join(
        ",".join(f'"{v}"' for v in line) for line in (header, units, row)
    )
    (parsed,) = ncu_kernels.parse(text, ["norm_act:bfloat16:768"])
    assert parsed["time_us"] == 24.288 and parsed["issue_active_pct"] == 81.07
    assert parsed["thread_instructions_per_element"] == round(393216 * 32 / (16384 * 768), 2)
    assert list(parsed["top_stalls"]) == ["not_selected", "long_scoreboard"]
