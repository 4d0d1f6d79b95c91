import ast
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graphopt.fused import cpp_codegen
from graphopt.fused.norm_act.triton_kernel import norm_act_config
from graphopt.fused.norm_act_linear.triton_kernel import norm_act_linear_config
from graphopt.kernels import aot, aot_codegen
from graphopt.kernels.aot_specs import all_variants, kernels
from graphopt.kernels.launch_rules import DTYPES, uniform_rows


def test_literal_round_trips_every_byte():
    data = bytes(range(256)) * 3 + b'??=\\"0123\x007'
    text = aot_codegen.literal(data)
    pieces = [ast.literal_eval("b" + line.strip()) for line in text.splitlines()]
    assert b"".join(pieces) == data


def test_specs_match_the_kernels():
    for spec in kernels():
        spec.check_signature()


def test_table_holds_every_tier_in_rule_order():
    variants = all_variants()
    assert len({v.key for v in variants}) == len(variants)
    for spec in kernels():
        for dtype in DTYPES:
            listed = [v.tier for v in variants if (v.op, v.part, v.dtype) == (spec.op, spec.part, dtype)]
            assert tuple(listed) == spec.tiers(dtype)


@pytest.mark.parametrize("cols", [1, 16, 100, 128, 256, 1000, 1024, 4096, 8192, 8208, 100000])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("uniform", [0, 1, 6, 512])
@pytest.mark.parametrize("out_features", [1, 3])
def test_table_lookup_agrees_with_the_config_rule(cols, aligned, uniform, out_features):
    """What C++ does with the table (first variant of the op and dtype whose max_cols admits the row,
    an exact one's equals it, whose alignment assumption holds, a shared-operand variant only where
    the operands are shared, a blockwise one only where its block_m divides the uniform rows, one that
    fixes the output count only where the launch has that many) picks the tier the Python config
    chose."""
    aligned = aligned and cols % 16 == 0
    k = {"NormAct": 0, "NormActLinear": out_features}
    configs = (
        ("NormAct", lambda cols, dtype, aligned: norm_act_config(8, cols, dtype, aligned, uniform)),
        (
            "NormActLinear",
            lambda cols, dtype, aligned: norm_act_linear_config(
                8, cols, dtype, aligned, uniform, out_features
            ),
        ),
    )
    for op, config in configs:
        for dtype in DTYPES:
            chosen = next(
                v.tier for v in all_variants()
                if v.op == op and v.dtype == dtype and cols <= v.tier.max_cols
                and (cols == v.tier.max_cols or not v.tier.exact)
                and (aligned or not v.tier.aligned) and (uniform == 0 or not v.tier.shared)
                and (uniform % v.tier.block_m == 0 or not v.tier.blockwise)
                and v.tier.out_features in (0, k[op])
            )  # fmt: skip
            assert chosen == config(cols, dtype, aligned).tier
            # (shared operands on aligned rows take the shared-operand variants, but for NormAct's
            # looped tier, which has none; runs of 512 rows NormActLinear's blockwise ones, shorter
            # runs those whose block divides them)
            assert chosen.shared == (uniform == 0 and aligned and not (op == "NormAct" and chosen.looped))
            if op == "NormActLinear" and aligned and uniform == 512:
                assert chosen.blockwise
            if chosen.blockwise:
                assert uniform != 0 and uniform % chosen.block_m == 0
            # (one output on exact narrow rows with shared or blockwise operands: K compiled in)
            narrow = chosen.exact and chosen.block_n <= 1024 and (chosen.shared or chosen.blockwise)
            assert chosen.out_features == (1 if op == "NormActLinear" and out_features == 1 and narrow else 0)


@pytest.mark.parametrize(
    ("operands", "expected"),
    [
        ([(1, 1), (1, 1)], 0),  # shared by every row
        ([(7, 1), (1, 1)], 0),  # one group: shared whatever its inner
        ([(512, 128), (1, 1)], 512),  # per-feature norms, a shared linear
        ([(512, 128), (1024, 4)], 512),
        ([(6, 4), (4, 6)], 2),  # runs of 2 rows read one row of each
        ([(1, 64), (8, 8)], 1),  # a per-row operand
    ],
)
def test_uniform_rows(operands, expected):
    assert uniform_rows(*operands) == expected


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_cpp_uniform_rows_agrees_with_python(tmp_path):
    """The C++ launcher's UniformRows (broadcast_rows.h) gives the number the Python rule gives, on
    random operand row broadcasts: the two pick variants by it."""
    source = tmp_path / "uniform_rows.cc"
    source.write_text(
        '#include <cstdio>\n#include <cstdlib>\n#include "broadcast_rows.h"\n'
        "int main(int argc, char** argv) {\n"
        "  graphopt::RowBroadcast a{atoll(argv[1]), atoll(argv[2])}, b{atoll(argv[3]), atoll(argv[4])};\n"
        "  graphopt::RowBroadcast c{atoll(argv[5]), atoll(argv[6])};\n"
        '  std::printf("%lld", static_cast<long long>(graphopt::UniformRows({a, b, c})));\n}\n'
    )
    include = Path(__file__).resolve().parents[2] / "graphopt" / "ort" / "src"
    binary = tmp_path / "uniform_rows"
    subprocess.run(["g++", "-std=c++17", f"-I{include}", str(source), "-o", str(binary)], check=True)
    gen = random.Random(7)
    for _ in range(40):
        operands = [
            (gen.choice([1, 2, 3, 4, 6, 8, 512, 1024]), gen.choice([1, 1, 2, 4, 128])) for _ in range(3)
        ]
        args = [str(v) for pair in operands for v in pair]
        got = subprocess.run([str(binary), *args], capture_output=True, text=True, check=True).stdout
        assert int(got) == uniform_rows(*operands), operands


def test_a_variant_that_fixes_the_output_count_compiles_it_in():
    """A tier with out_features passes it as the kernel's OUT_FEATURES constant; every variant keeps
    the same argument list (out_features is still passed, and ignored where fixed)."""
    from graphopt.fused.norm_act_linear.triton_kernel import AOT_KERNEL

    fixed = next(t for t in AOT_KERNEL.tiers("float32") if t.out_features)
    general = next(t for t in AOT_KERNEL.tiers("float32") if not t.out_features)
    assert fixed.name.endswith("_k1") and not general.name.endswith("_k1")
    assert AOT_KERNEL.constexpr_values(fixed)["OUT_FEATURES"] == 1
    assert AOT_KERNEL.constexpr_values(general)["OUT_FEATURES"] == 0
    assert AOT_KERNEL.signature("float32")["out_features"] == "i32"


def test_render_writes_images_and_table():
    variants = all_variants()[:2]
    results = [
        aot.Compiled(i, v.key, "entry_fn", v.tier.num_warps, 2, (0, 1), (0, 1),
                     [aot.Image(80, b"\x7fELF\x00x", 0), aot.Image(0, b".target sm_80\x00", 16)])
        for i, v in enumerate(variants)
    ]  # fmt: skip
    text = aot_codegen.render(list(zip(variants, results, strict=True)), "0.0")
    assert text.count("alignas(16) const unsigned char kImage") == 4
    assert '"entry_fn", 2, 0, 1, 0, 1, kImages1, 2,' in text
    assert "GeneratedKernelTable()" in text


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_build_one_variant_and_compile_the_table(tmp_path):
    # A subprocess: the AOT build needs real Triton kernels, not the interpreter the tests use.
    key = f"NormAct/float32/{norm_act_config(1, 256, 'float32').tier.name}"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "graphopt.kernels.aot", "--out", str(tmp_path), "--archs", "80,86,90",
           "--jobs", "1", "--only", key]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    source = (tmp_path / "kernel_images.cc").read_text()
    for image in ("sm_80", "sm_86", "sm_90", "PTX"):
        assert f"// {key} {image}" in source
    assert "\\177ELF" in source and ".target sm_80" in source
    if shutil.which("g++"):
        include = REPO / "graphopt" / "ort" / "cuda"
        cpp_codegen.main(["--out", str(tmp_path)])  # the generated enums kernel_table.h includes
        check = ["g++", "-std=c++17", "-fsyntax-only", f"-I{include}", f"-I{tmp_path}"]
        check.append(str(tmp_path / "kernel_images.cc"))
        compiled = subprocess.run(check, capture_output=True, text=True)
        assert compiled.returncode == 0, compiled.stderr


def test_unknown_variant_filter_is_an_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(aot, "_quiet_environment", lambda: None)
    assert aot.main(["--out", str(tmp_path), "--only", "no-such-variant"]) == 2
    assert "no variant matches" in capsys.readouterr().err
