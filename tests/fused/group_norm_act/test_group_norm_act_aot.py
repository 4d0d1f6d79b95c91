"""GroupNormAct in the ahead-of-time table: its variants listed in tier order, and the C++ launcher's
first-match lookup picking the tier the Python launcher picks."""

import pytest

from graphopt.fused.group_norm_act.triton_kernel import group_norm_act_tier, group_norm_act_tiers
from graphopt.kernels.aot_specs import all_variants
from graphopt.kernels.launch_rules import DTYPES


def test_table_lists_the_tiers_in_rule_order():
    for dtype in DTYPES:
        listed = [v.tier for v in all_variants() if v.op == "GroupNormAct" and v.dtype == dtype]
        assert tuple(listed) == group_norm_act_tiers(dtype)


@pytest.mark.parametrize("group_size", [1, 64, 1000, 1024, 1025, 4096, 8192, 9000, 16384, 1 << 22])
def test_table_lookup_agrees_with_the_python_launcher(group_size):
    for dtype in DTYPES:
        chosen = next(
            v.tier for v in all_variants()
            if v.op == "GroupNormAct" and v.dtype == dtype and group_size <= v.tier.max_cols
        )  # fmt: skip
        assert chosen == group_norm_act_tier(group_size, dtype)
