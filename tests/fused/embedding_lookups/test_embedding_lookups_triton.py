"""The EmbeddingLookups Triton kernel against the spec's reference (under Triton's interpreter on a
CPU): random and adversarial indices (each table's first and last row, negatives that wrap, indices just
out of range of their own table), int32 and int64 indices, every storage type, one-block and looped
rows, widths that are not multiples of 16. Lookups are exact: the rows must be equal, bit for bit."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "kernels"))
from kernel_checks import assert_written, device, generator, poisoned

from graphopt.fused.embedding_lookups.spec import EMBEDDING_LOOKUPS
from graphopt.fused.embedding_lookups.triton_kernel import (
    embedding_lookups_config,
    embedding_lookups_tiers,
    launch_embedding_lookups,
)

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
SIZES = (7, 1, 50, 13)  # rows of each feature's table


def tables(sizes, width, dtype, gen):
    """The features' tables one after another, each row distinct: (table, offsets, sizes)."""
    rows = sum(sizes)
    table = torch.randn(rows, width, generator=gen, dtype=torch.float64).to(dtype)
    offsets = torch.tensor([sum(sizes[:k]) for k in range(len(sizes))], dtype=torch.int64)
    return table.to(device()), offsets.to(device()), torch.tensor(sizes, dtype=torch.int64).to(device())


def edge_indices(sizes, per_feature, index_dtype, gen, *, wrap):
    """Each feature's first and last row (and, where negatives wrap, -size and -1), the rest random."""
    out = torch.empty(len(sizes), per_feature, dtype=torch.int64)
    for k, size in enumerate(sizes):
        low = -size if wrap else 0
        out[k] = torch.randint(low, size, (per_feature,), generator=gen)
        edges = [0, size - 1, *([-size, -1] if wrap else [])]
        out[k, : len(edges)] = torch.tensor(edges)[:per_feature]
    return out.to(index_dtype)


def run(table, indices, offsets, sizes, *, wrap, trap=False):
    """Y from the kernel, through a poisoned output (nothing past it may be written)."""
    width = table.shape[1]
    y, storage = poisoned((indices.numel(), width), table.dtype)
    launch_embedding_lookups(
        table, indices.reshape(-1).to(device()), offsets, sizes, y,
        per_feature=indices[0].numel(), wrap_negative=int(wrap), trap=trap,
    )  # fmt: skip
    assert_written(storage, indices.numel() * width, "EmbeddingLookups")
    return y.view(*indices.shape, width)


def reference(table, indices, offsets, sizes, wrap):
    expected = EMBEDDING_LOOKUPS.reference(
        table.cpu().float().numpy(), indices.numpy(), offsets.cpu().numpy(), sizes.cpu().numpy(),
        wrap_negative=int(wrap),
    )  # fmt: skip
    return torch.from_numpy(expected).to(table.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("wrap", [False, True])
@pytest.mark.parametrize("width", [16, 10, 64, 200, 1500])
def test_rows_are_exact(dtype, index_dtype, wrap, width):
    gen = generator(dtype, index_dtype, wrap, width)
    table, offsets, sizes = tables(SIZES, width, dtype, gen)
    indices = edge_indices(SIZES, 9, index_dtype, gen, wrap=wrap)
    y = run(table, indices, offsets, sizes, wrap=wrap)
    assert torch.equal(y.cpu(), reference(table, indices, offsets, sizes, wrap))


def test_indices_of_any_rank_keep_their_shape():
    gen = generator("rank")
    table, offsets, sizes = tables(SIZES, 8, torch.float32, gen)
    indices = edge_indices(SIZES, 12, torch.int64, gen, wrap=False).view(4, 3, 2, 2)
    y = run(table, indices, offsets, sizes, wrap=False)
    assert y.shape == (4, 3, 2, 2, 8)
    assert torch.equal(y.cpu(), reference(table, indices, offsets, sizes, False))


@pytest.mark.parametrize("rows", [1, 127, 129, 4099])
def test_row_counts_around_the_block(rows):
    """Indices per feature that leave the last program's block partly empty."""
    gen = generator("rows", rows)
    table, offsets, sizes = tables((300, 200), 32, torch.float16, gen)
    indices = edge_indices((300, 200), rows, torch.int64, gen, wrap=True)
    y = run(table, indices, offsets, sizes, wrap=True)
    assert torch.equal(y.cpu(), reference(table, indices, offsets, sizes, True))


# An index just outside its own table is a neighbour's row once offset: it must be found nowhere.
OUT_OF_RANGE = {"past_own_table": lambda size: size, "below_own_table": lambda size: -size - 1}


@pytest.mark.parametrize("bad", [*OUT_OF_RANGE, "negative_without_wrap"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_out_of_range_row_is_zeros_without_trap(bad, index_dtype):
    """What ONNX Runtime's CUDA Gather gives for the original's out-of-range index: a row of zeros;
    every other row is still looked up."""
    gen = generator(bad, index_dtype)
    table, offsets, sizes = tables(SIZES, 16, torch.float32, gen)
    wrap = bad != "negative_without_wrap"
    indices = edge_indices(SIZES, 5, index_dtype, gen, wrap=wrap)
    value = -1 if bad == "negative_without_wrap" else OUT_OF_RANGE[bad](SIZES[2])
    indices[2, 3] = value
    y = run(table, indices, offsets, sizes, wrap=wrap)
    assert torch.equal(y[2, 3].cpu(), torch.zeros(16))
    good = indices.clone()
    good[2, 3] = 0
    expected = reference(table, good, offsets, sizes, wrap)
    expected[2, 3] = 0
    assert torch.equal(y.cpu(), expected)
    with pytest.raises(IndexError, match="feature 2: index"):
        reference(table, indices, offsets, sizes, wrap)


@pytest.mark.parametrize("bad", ["past_own_table", "below_own_table"])
def test_out_of_range_index_traps_when_asked(bad):
    """torch's CUDA path asks for the trap: the launch fails, as torch's device-side assert fails the
    original's (under the interpreter the failure is an exception from the launch)."""
    gen = generator("trap", bad)
    table, offsets, sizes = tables(SIZES, 16, torch.float32, gen)
    indices = edge_indices(SIZES, 5, torch.int64, gen, wrap=True)
    run(table, indices, offsets, sizes, wrap=True, trap=True)  # in range: no trap
    indices[3, 4] = OUT_OF_RANGE[bad](SIZES[3])
    if device() == "cuda":
        pytest.skip("a trap loses the CUDA context: test_embedding_lookups_torch.py traps in a subprocess")
    with pytest.raises(Exception, match="out of range"):
        run(table, indices, offsets, sizes, wrap=True, trap=True)


def test_offsets_that_do_not_fit_the_table_find_nothing():
    """Offsets and sizes are the op's inputs: a feature placed past the table reads no memory there."""
    gen = generator("fit")
    table, offsets, sizes = tables(SIZES, 16, torch.float32, gen)
    sizes = sizes.clone()
    sizes[-1] += 5  # the last feature's table would run 5 rows past the end
    indices = torch.full((len(SIZES), 2), SIZES[-1] + 2, dtype=torch.int64)
    y = run(table, indices, offsets, sizes, wrap=False)
    assert torch.equal(y[-1].cpu(), torch.zeros(2, 16))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_every_width_has_a_tier(dtype):
    for cols in (1, 15, 16, 17, 64, 100, 128, 1024, 1025, 5000):
        aligned = cols % 16 == 0
        tier = embedding_lookups_config(10, cols, dtype, aligned).tier
        assert cols <= tier.max_cols and (aligned or not tier.aligned)
        assert tier.looped == (cols > 1024)
    assert embedding_lookups_tiers(dtype)[-1].looped
