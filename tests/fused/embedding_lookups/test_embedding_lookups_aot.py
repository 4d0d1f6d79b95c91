"""EmbeddingLookups in the ahead-of-time table: its variants listed in tier order, the C++ launcher's
first-match lookup picking the tier the Python launcher picks, and the kernel compiled for a GPU
(no GPU needed): 16-byte vector copies where rows are aligned, and the device-side trap kept."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from graphopt.fused.embedding_lookups.triton_kernel import embedding_lookups_config, embedding_lookups_tiers
from graphopt.kernels.aot_specs import all_variants
from graphopt.kernels.launch_rules import DTYPES

REPO = Path(__file__).resolve().parents[3]


def test_table_lists_the_tiers_in_rule_order():
    for dtype in DTYPES:
        listed = [v.tier for v in all_variants() if v.op == "EmbeddingLookups" and v.dtype == dtype]
        assert tuple(listed) == embedding_lookups_tiers(dtype)


@pytest.mark.parametrize("cols", [1, 10, 16, 32, 48, 64, 100, 128, 200, 512, 1000, 1024, 1040, 100000])
def test_table_lookup_agrees_with_the_python_launcher(cols):
    for aligned in (cols % 16 == 0, False):
        for dtype in DTYPES:
            chosen = next(
                v.tier for v in all_variants()
                if v.op == "EmbeddingLookups" and v.dtype == dtype and cols <= v.tier.max_cols
                and (cols == v.tier.max_cols or not v.tier.exact) and (aligned or not v.tier.aligned)
            )  # fmt: skip
            assert chosen == embedding_lookups_config(8, cols, dtype, aligned).tier


@pytest.mark.slow
def test_compiled_kernel_copies_in_vectors_and_keeps_the_trap():
    # A subprocess: compiling needs the real kernel, not the interpreter the tests use.
    script = textwrap.dedent("""
        import triton
        from triton.backends.compiler import GPUTarget
        from graphopt.fused.embedding_lookups.triton_kernel import AOT_KERNEL, embedding_lookups_config
        tier = embedding_lookups_config(1, 64, "float16").tier
        src = triton.compiler.ASTSource(
            fn=AOT_KERNEL.fn, signature=AOT_KERNEL.signature("float16"),
            constexprs=AOT_KERNEL.constexpr_values(tier), attrs=AOT_KERNEL.attrs(tier.aligned),
        )
        options = {"num_warps": tier.num_warps}
        ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]
        print(ptx.count("@p trap;"), ptx.count("ld.global.v4"), ptx.count("st.global.v4"))
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    traps, loads, stores = map(int, done.stdout.split())
    assert traps >= 1 and loads >= 1 and stores >= 1
