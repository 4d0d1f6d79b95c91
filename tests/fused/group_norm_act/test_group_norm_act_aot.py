"""GroupNormAct in the ahead-of-time table: its kernels' variants listed in tier order, and the
C++ launcher's first-match lookup (op, part, dtype; min_cols, max_cols, max_rows, alignment: Select in
graphopt/ort/cuda/launch.cc) choosing the path, tier and chunks the Python launcher chooses."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphopt.fused.group_norm_act import launch_rule
from graphopt.fused.group_norm_act.triton_kernel import AOT_KERNELS
from graphopt.kernels.aot_specs import all_variants
from graphopt.kernels.launch_rules import DTYPES


def test_table_lists_every_kernels_tiers_in_rule_order():
    whole, split = launch_rule.whole_tiers, launch_rule.split_tiers
    tiers = {"": whole, "stats": split, "apply": split, "apply_long_channels": split}
    assert sorted(k.part for k in AOT_KERNELS) == sorted(tiers)
    for part, expected in tiers.items():
        for dtype in DTYPES:
            listed = [
                v.tier for v in all_variants() if (v.op, v.part, v.dtype) == ("GroupNormAct", part, dtype)
            ]
            assert tuple(listed) == expected(dtype)


def cpp_select(part, dtype, rows, cols, aligned, channel=0):
    """What Select (launch.cc) returns: the first variant of the part that admits the launch."""
    for v in all_variants():
        t = v.tier
        if (v.op, v.part, v.dtype) != ("GroupNormAct", part, dtype):
            continue
        bounds = t.min_cols <= cols <= t.max_cols and rows <= t.max_rows and channel >= t.min_channel
        if bounds and (aligned or not t.aligned):
            return t
    return None


def cpp_chunks(tier, cols):
    """The chunking of cuda_launch.cc's Choose."""
    blocks = (cols + tier.block_n - 1) // tier.block_n
    chunk = (blocks + tier.max_chunks - 1) // tier.max_chunks * tier.block_n
    return chunk, (cols + chunk - 1) // chunk


@pytest.mark.parametrize("rows", [1, 32, 64, 255, 256, 4096])
@pytest.mark.parametrize("group_size", [1, 64, 1000, 4096, 8191, 8192, 8200, 9000, 16384, 40960, 1 << 22])
@pytest.mark.parametrize("spatial", [1, 1024, 4095, 4096, 1 << 22])
def test_table_lookup_agrees_with_the_python_launcher(rows, group_size, spatial):
    spatial = min(spatial, group_size)
    for dtype in DTYPES:
        for aligned in (True, False):
            aligned = aligned and group_size % 16 == 0
            split = launch_rule.split_launch(rows, group_size, spatial, dtype, aligned)
            stats = cpp_select("stats", dtype, rows, group_size, aligned, spatial)
            if split is None:
                assert stats is None
                assert cpp_select("", dtype, 0, group_size, aligned) == launch_rule.whole_tier(
                    group_size, dtype, aligned
                )
            else:
                assert stats == split.tier == cpp_select("apply", dtype, rows, group_size, aligned, spatial)
                assert cpp_chunks(stats, group_size) == (split.chunk, split.chunks)


REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_the_split_kernels_compile_ahead_of_time(tmp_path):
    # A subprocess: the AOT build needs real Triton kernels, not the interpreter the tests use.
    tier = launch_rule.split_tiers("bfloat16")[0]
    keys = [f"GroupNormAct.{part}/bfloat16/{tier.name}" for part in ("stats", "apply")]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "graphopt.kernels.aot", "--out", str(tmp_path), "--archs", "80,90",
           "--jobs", "1", "--only", f"/bfloat16/{tier.name}"]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    source = (tmp_path / "kernel_images.cc").read_text()
    for key, part in zip(keys, ("stats", "apply"), strict=True):
        for image in ("sm_80", "sm_90", "PTX"):
            assert f"// {key} {image}" in source
        assert f'{{KernelOp::kGroupNormAct, "{part}", DType::kBFloat16,' in source
