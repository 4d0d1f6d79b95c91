"""bench/bench_widths.py's logic on the CPU (``--check``: Triton's interpreter, wall-clock times): the
record it writes, what a spent budget leaves, and the candidate shapes' rule."""

import json

import pytest

from bench import bench_widths
from bench.widths_candidates import chunked_shapes, chunkings, shapes, two_pieces

FIELDS = ("op", "runtime", "dtype", "D", "rows", "affine", "activation", "us", "copy_us", "roofline_us",
          "torch_compile_us")  # fmt: skip


def _runtimes() -> str:
    from graphopt.ort import OrtLibraryNotFoundError, library_path

    try:
        library_path()
        return "torch,ort"
    except OrtLibraryNotFoundError:
        return "torch"


def test_check_mode_writes_a_valid_record(tmp_path):
    runtimes = _runtimes()
    argv = ["--check", "--out", str(tmp_path), "--ops", "norm_act,add_norm_act_linear", "--dims", "768",
            "--affine", "1,0", "--rows", "16", "--runtimes", runtimes, "--candidates", "1"]  # fmt: skip
    assert bench_widths.main(argv) == 0
    record = json.loads((tmp_path / "widths_check.json").read_text())
    assert record["complete"] and record["command"].startswith("python bench/bench_widths.py --check")
    cells = record["cells"]
    assert len(cells) == 2 * 2 * len(runtimes.split(","))
    for cell in cells:
        assert list(cell)[: len(FIELDS)] == list(FIELDS), cell
        assert cell["us"] > 0 and cell["copy_us"] > 0 and not cell.get("errors"), cell
        assert cell["torch_compile_us"] is None and cell["notes"]["torch_compile"] == "skipped: no GPU"
        if cell["runtime"] == "ort":
            assert cell["ort_native_us"] > 0 and "ort_identity" in cell["copy_methods"]
        if cell["vs_copy"] > 1.10:
            assert cell["explanation"].startswith("auto:")
    torch_norm_act = next(c for c in cells if c["runtime"] == "torch" and c["op"] == "norm_act")
    # 768 = 512 + 256: the two-piece candidate ran and passed its check
    assert any(
        k.startswith("two_piece_") and isinstance(v, float) for k, v in torch_norm_act["candidates"].items()
    )
    assert "| norm_act | torch | float32 | 768 |" in (tmp_path / "widths_check.md").read_text()


def test_a_spent_budget_still_writes_a_valid_record(tmp_path):
    assert bench_widths.main(["--check", "--out", str(tmp_path), "--budget-s", "0", "--no-picture"]) == 0
    record = json.loads((tmp_path / "widths_check.json").read_text())
    assert record["cells"] == [] and not record["complete"] and "budget" in record["stopped"]


def test_resume_measures_only_what_the_record_lacks(tmp_path):
    common = ["--check", "--out", str(tmp_path), "--ops", "norm_act", "--rows", "8", "--affine", "1",
              "--runtimes", "torch", "--no-picture"]  # fmt: skip
    assert bench_widths.main([*common, "--dims", "256"]) == 0
    first = json.loads((tmp_path / "widths_check.json").read_text())
    assert bench_widths.main([*common, "--dims", "256,384", "--resume"]) == 0
    record = json.loads((tmp_path / "widths_check.json").read_text())
    assert [c["D"] for c in record["cells"]] == [256, 384]
    assert record["cells"][0] == first["cells"][0] and record["earlier_runs"][0]["date"] == first["date"]


@pytest.mark.parametrize(("d", "pieces"), [(768, (512, 256)), (5120, (4096, 1024)), (384, (256, 128)),
                                           (1024, None), (896, None), (1000, None)])  # fmt: skip
def test_two_pieces(d, pieces):
    assert two_pieces(d) == pieces


def test_candidate_shapes_keep_values_per_thread_near_16():
    found = shapes(1024, 3)
    assert found and all(8 <= m * 1024 / (32 * w) <= 32 for m, w in found)
    assert found[0] in ((1, 2), (2, 4), (4, 8))  # exactly 16 per thread, fewest rows first


def test_candidate_shapes_end_with_every_one_warp_shape_not_yet_listed():
    found = shapes(768, 3)
    assert found[:3] == shapes(768, 3)[:3] and {(1, 1), (2, 1)} <= set(found[3:])  # 24 and 48 a thread
    assert len(found) == len(set(found))
    assert (4, 1) not in shapes(768, 3)  # (96 values a thread: past 48)


@pytest.mark.parametrize(("d", "found"), [(768, [(3, 256)]), (640, [(5, 128)]), (1024, []), (96, [])])
def test_chunkings_are_odd_counts_of_power_of_two_chunks(d, found):
    assert chunkings(d) == found
    for chunks, p in found:  # (15 of 16 or 30 of 32 chunk rows of a tile hold data)
        tiles = [m * chunks for m, _ in chunked_shapes(chunks, p, 4)]
        assert tiles and set(tiles) <= {15, 30}, tiles
