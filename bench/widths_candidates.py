"""Candidate launch shapes for widths that are not powers of two, timed by ``bench_widths.py
--candidates`` next to the tier graphopt's rule picks today (graphopt itself is unchanged).

- ``masked``: the shipped kernels (NormAct's and NormActLinear's) with the row padded to the next
  power of two as today, but other rows per program and warps than the tier's.
- ``two_piece`` (NormAct and NormActLinear): a width D = 2^a + 2^b (every 3 * 2^k and 5 * 2^k:
  384, 640, 768, 1280, 1536, 2560, 3072, 5120) read as two exact power-of-two blocks, a head of 2^a
  columns and a tail of 2^b, so no lane is masked off and no register holds padding (the kernels'
  head-and-tail paths, which the tiers of ``Tier.tail`` take). Triton's ``tl.arange`` takes only
  power-of-two lengths, so a non-power-of-two row cannot be one block; at D = 768 the padded block
  leaves a quarter of the lanes idle, at 1280, 2560 and 5120 three eighths.
- ``chunked`` (NormAct, affine, no residual): ``bench/probe_chunked_rows.py``'s kernel, rows of 3, 5
  or 7 power-of-two chunks several rows to a tile (tried on an H200, not adopted).

Shapes are chosen by one rule for every width: values per thread = rows per program * block
columns / threads, kept near 16 (the shipped tiers' own rule of thumb) and within 8 to 32, then every
one-warp shape of 8 to 48 values a thread.
"""

from __future__ import annotations

import math

import triton

from graphopt.fused import Activation, Norm
from graphopt.fused.norm_act.triton_kernel import norm_act_kernel
from graphopt.fused.norm_act_linear.triton_kernel import norm_act_linear_kernel
from graphopt.kernels.launch_rules import Tier


def two_pieces(d: int) -> tuple[int, int] | None:
    """(head, tail) powers of two with head > tail and head + tail = d, or None."""
    if d & (d - 1) == 0 or bin(d).count("1") != 2:
        return None
    head = 1 << (d.bit_length() - 1)
    return head, d - head


def shapes(block_cols: int, count: int, skip: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """Up to ``count`` (block_m, num_warps) with block_m * block_cols / (32 * num_warps) values per
    thread within 8 to 32, nearest 16 first (then fewer rows per program); then every one-warp shape
    of 8 to 48 values a thread not among them: a one-warp program's row sums need no barrier between
    warps, which short 16-bit rows, bound by instruction issue, may pay for in registers."""
    found = []
    for m in (1, 2, 4, 8):
        for w in (1, 2, 4, 8, 16):
            per_thread = m * block_cols / (32 * w)
            if 8 <= per_thread <= 32 and (m, w) != skip:
                found.append((abs(math.log2(per_thread / 16)), m, w))
    picked = [(m, w) for _, m, w in sorted(found)[:count]]
    one_warp = [(m, 1) for m in (1, 2, 4) if 8 <= m * block_cols / 32 <= 48 and (m, 1) != skip]
    return picked + [shape for shape in one_warp if shape not in picked]


def _norm_act_masked(data, at, m, w, n, exact, tail=0):
    """NormAct's kernel on blocks of m rows of n columns (with ``tail``: a head of n columns and a
    tail tile, the kernel's head-and-tail path)."""
    c, p, x0 = data.case, data.params, data.inputs[0]["x"]
    rows, d = x0.shape
    grid = (triton.cdiv(rows, m),)
    act = int(Activation.parse(c.activation))

    def call(i):
        x, out = data.inputs[i]["x"], data.outputs[i]
        r = data.inputs[i].get("residual", x)
        w_, b_ = p.get("scale", x), p.get("bias", x)
        norm_act_kernel[grid](
            x, r, w_, b_, out["y"], out.get("sum", out["y"]), rows, d, d, d, c.eps, int(Norm.LAYER), act,
            int(c.affine), int(c.affine), int(c.residual), 1, 1, 1, 1, 1, rows,
            BLOCK_M=m, BLOCK_N=n, ITERS=1, LOOPED=False, EVEN=exact, TAIL_N=tail, num_warps=w,
        )  # fmt: skip
        return tuple(out.values())

    return [lambda i=i: call(i) for i in at]


def _norm_act_chunked(data, at, m, w, p, chunks):
    """bench/probe_chunked_rows.py's kernel on m rows of chunks x p columns a program."""
    from bench.probe_chunked_rows import chunked_norm_act_kernel

    c, params, x0 = data.case, data.params, data.inputs[0]["x"]
    grid = (triton.cdiv(x0.shape[0], m),)
    act = int(Activation.parse(c.activation))

    def call(i):
        x, out = data.inputs[i]["x"], data.outputs[i]
        chunked_norm_act_kernel[grid](
            x, params["scale"], params["bias"], out["y"], x.shape[0], c.eps, act,
            BLOCK_M=m, P=p, CHUNKS=chunks, num_warps=w,
        )  # fmt: skip
        return tuple(out.values())

    return [lambda i=i: call(i) for i in at]


def _norm_act_linear_masked(data, at, m, w, n, tail=0):
    c, p, x0 = data.case, data.params, data.inputs[0]["x"]
    rows, d = x0.shape
    grid = (triton.cdiv(rows, m),)
    act = int(Activation.parse(c.activation))

    def call(i):
        x, out = data.inputs[i]["x"], data.outputs[i]
        r = data.inputs[i].get("residual", x)
        norm_act_linear_kernel[grid](
            x, r, p.get("scale", x), p.get("bias", x), p["weight"], p["linear_bias"], out["y"],
            out.get("sum", out["y"]), rows, d, c.k, d, d, c.eps, int(Norm.LAYER), act, 0,
            int(c.affine), int(c.affine), 1, int(c.residual), int(c.residual),
            1, 1, 1, 1, 1, rows, 1, 1, 1, 1,
            BLOCK_M=m, BLOCK_N=n, LOOPED=False, EVEN=False, SHARED=bool(tail), TAIL_N=tail, num_warps=w,
        )  # fmt: skip
        return tuple(out.values())

    return [lambda i=i: call(i) for i in at]


def chunkings(d: int) -> list[tuple[int, int]]:
    """(chunks, chunk columns) with chunks odd and at least 3 and the chunk a power of two of at least
    64 columns whose product is d (768 = 3 x 256, 640 = 5 x 128), or none."""
    found = []
    for chunks in (3, 5, 7):
        p = d // chunks
        if d % chunks == 0 and p >= 64 and p & (p - 1) == 0:
            found.append((chunks, p))
    return found


def chunked_shapes(chunks: int, p: int, count: int) -> list[tuple[int, int]]:
    """Up to ``count`` (rows per program, num_warps): tiles of 16 or 32 chunk rows (rows * chunks of
    them hold chunks), 8 to 32 values a thread, nearest 16 first."""
    found = []
    for tile in (16, 32):
        for w in (1, 2, 4, 8, 16):
            per_thread = tile * p / (32 * w)
            if 8 <= per_thread <= 32 and tile // chunks >= 1:
                found.append((abs(math.log2(per_thread / 16)), tile, tile // chunks, w))
    return [(m, w) for _, _, m, w in sorted(found)[:count]]


def candidate_calls(data, at: list[int], current: Tier, count: int = 3) -> dict[str, list]:
    """name -> calls of each candidate for the case (widths up to 8192; none for the looped tier)."""
    d = data.case.D
    if d > 8192 or d % 16:
        return {}
    n = 1 << (d - 1).bit_length()
    found = {}
    skip = (current.block_m, current.num_warps) if current.block_n == n and current.iters == 1 else None
    for m, w in shapes(n, count, skip):
        if data.case.linear:
            found[f"masked_m{m}_n{n}_w{w}"] = _norm_act_linear_masked(data, at, m, w, n)
        else:
            found[f"masked_m{m}_n{n}_w{w}"] = _norm_act_masked(data, at, m, w, n, n == d)
    pieces = two_pieces(d)
    for m, w in shapes(d, count) if pieces else ():
        head, tail = pieces
        name = f"two_piece_m{m}_n{head}+{tail}_w{w}"
        if data.case.linear:
            found[name] = _norm_act_linear_masked(data, at, m, w, head, tail)
        else:
            found[name] = _norm_act_masked(data, at, m, w, head, True, tail)
    plain_affine = not data.case.linear and data.case.affine and not data.case.residual
    for chunks, p in chunkings(d) if plain_affine else ():
        for m, w in chunked_shapes(chunks, p, count):
            found[f"chunked_m{m}_n{p}x{chunks}_w{w}"] = _norm_act_chunked(data, at, m, w, p, chunks)
    return found
