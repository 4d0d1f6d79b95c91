"""Ahead-of-time build of the fused Triton kernels for the ONNX Runtime CUDA launcher.

    python -m graphopt.kernels.aot --out DIR [--archs 80,86,89,90] [--jobs N]

compiles every variant (``aot_specs.all_variants``) to a cubin per architecture plus portable PTX
and writes DIR/kernel_images.cc: the images as byte arrays and the table the C++ launcher selects
from (see graphopt/ort/cuda/kernel_table.h). Needs Triton but neither torch nor a GPU.

Per variant, capability 80 is compiled in full: its PTX (``.target sm_80``) is the portable image
newer GPUs JIT-compile, and ptxas turns that same PTX into the sm_86 and sm_89 cubins, as the
driver would. Capability 90 and above are compiled in full, since Triton generates sm_90a code
for them; arch-specific PTX is not forward-compatible, so it is not kept.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

PTX_ARCH = 80  # the capability whose PTX is embedded
DEFAULT_ARCHS = (80, 86, 89, 90)


@dataclass
class Image:
    arch: int  # compute capability as major * 10 + minor; 0 for PTX
    data: bytes
    shared: int  # dynamic shared memory in bytes


@dataclass
class Compiled:
    index: int
    key: str
    entry: str
    num_warps: int
    hidden_args: int  # trailing scratch pointers Triton appends to the kernel's parameters
    global_scratch: tuple[int, int]  # (size, align)
    profile_scratch: tuple[int, int]
    images: list[Image] = field(default_factory=list)
    seconds: float = 0.0


def _quiet_environment() -> None:
    # Line info would embed source paths in the images, and it is not needed to launch them.
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    # Triton 3.9 warns unless FP fusion is chosen explicitly; the JIT default is on.
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


def _entry_params(ptx: str, entry: str) -> int:
    match = re.search(rf"\.entry\s+{re.escape(entry)}\s*\((.*?)\)", ptx, re.S)
    if match is None:
        raise RuntimeError(f"entry {entry} not found in PTX")
    return match.group(1).count(".param")


def _compile(src, arch: int, num_warps: int):
    import triton
    from triton.backends.compiler import GPUTarget

    options = {"num_warps": num_warps, "enable_fp_fusion": True}
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)


def _assemble(ptx: str, arch: int, num_warps: int) -> bytes | None:
    """ptxas of an existing PTX for another architecture, through Triton's own backend; None when
    this Triton's backend does not offer it in the expected form."""
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend

        backend = make_backend(GPUTarget("cuda", arch, 32))
        options = backend.parse_options({"num_warps": num_warps, "enable_fp_fusion": True})
        return backend.make_cubin(ptx, {}, options, arch)
    except (AttributeError, TypeError):
        return None


def compile_variant(index: int, archs: tuple[int, ...]) -> Compiled:
    _quiet_environment()
    import triton

    from graphopt.kernels.aot_specs import all_variants

    start = time.perf_counter()
    variant = all_variants()[index]
    spec, tier = variant.spec, variant.tier
    src = triton.compiler.ASTSource(
        fn=spec.fn,
        signature=spec.signature(variant.dtype),
        constexprs=spec.constexpr_values(tier),
        attrs=spec.attrs(tier.aligned),
    )
    base = _compile(src, PTX_ARCH, tier.num_warps)
    meta = base.metadata
    if getattr(meta, "num_ctas", 1) != 1 or getattr(meta, "launch_cooperative_grid", False):
        raise RuntimeError(f"{variant.key}: clusters and cooperative launches are not supported")
    ptx = base.asm["ptx"]
    result = Compiled(
        index=index,
        key=variant.key,
        entry=meta.name,
        num_warps=tier.num_warps,
        hidden_args=_entry_params(ptx, meta.name) - len(spec.args),
        global_scratch=(getattr(meta, "global_scratch_size", 0), getattr(meta, "global_scratch_align", 1)),
        profile_scratch=(getattr(meta, "profile_scratch_size", 0), getattr(meta, "profile_scratch_align", 1)),
    )
    for arch in archs:
        if arch == PTX_ARCH:
            result.images.append(Image(arch, base.asm["cubin"], meta.shared))
            continue
        cubin = _assemble(ptx, arch, tier.num_warps) if arch // 10 == PTX_ARCH // 10 else None
        if cubin is not None:
            result.images.append(Image(arch, cubin, meta.shared))
            continue
        full = _compile(src, arch, tier.num_warps)
        if _entry_params(full.asm["ptx"], full.metadata.name) - len(spec.args) != result.hidden_args:
            raise RuntimeError(f"{variant.key}: sm_{arch} has a different parameter list")
        result.images.append(Image(arch, full.asm["cubin"], full.metadata.shared))
    # The PTX goes last: the launcher takes an exact cubin first.
    result.images.append(Image(0, ptx.encode() + b"\0", meta.shared))
    result.seconds = time.perf_counter() - start
    return result


def build(out: Path, archs: tuple[int, ...], jobs: int, only: str = "") -> Path:
    _quiet_environment()
    import triton

    from graphopt.kernels import aot_codegen
    from graphopt.kernels.aot_specs import all_variants, kernels

    for spec in kernels():
        spec.check_signature()
    selected = [(i, v) for i, v in enumerate(all_variants()) if only in v.key]
    if not selected:
        raise ValueError(f"no variant matches {only!r}")
    log.info(
        "graphopt AOT: %d variants x sm_%s + PTX, %d jobs", len(selected), ", sm_".join(map(str, archs)), jobs
    )
    start = time.perf_counter()
    results: list[Compiled] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(compile_variant, i, archs) for i, _ in selected]
        for done, future in enumerate(futures, 1):
            result = future.result()
            results.append(result)
            log.info("  [%d/%d] %s (%.1f s)", done, len(selected), result.key, result.seconds)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "kernel_images.cc"
    tmp = target.with_suffix(".cc.tmp")
    pairs = [(variant, result) for (_, variant), result in zip(selected, results, strict=True)]
    tmp.write_text(aot_codegen.render(pairs, triton.__version__))
    tmp.replace(target)
    size = sum(len(img.data) for r in results for img in r.images)
    log.info("wrote %s: %.1f MiB of images in %.1f s", target, size / 2**20, time.perf_counter() - start)
    return target


def parse_archs(text: str) -> tuple[int, ...]:
    archs = tuple(sorted({int(a) for a in text.replace(" ", "").split(",") if a}))
    if not archs or any(a < 80 for a in archs):
        raise argparse.ArgumentTypeError(f"expected capabilities >= 80 such as 80,86,89,90, got {text!r}")
    return archs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m graphopt.kernels.aot", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for kernel_images.cc")
    parser.add_argument("--archs", type=parse_archs, default=DEFAULT_ARCHS, help="e.g. 80,86,89,90")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compilations")
    parser.add_argument(
        "--only",
        default="",
        help="compile only variants whose key contains this (quick checks: partial table)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    try:
        build(args.out, args.archs, max(1, args.jobs), args.only)
    except ImportError as exc:
        print(f"graphopt AOT: {exc}; Triton is needed to build the CUDA kernels", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"graphopt AOT: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
