"""Inputs and checks shared by the kernel tests: strided random rows, NaN-poisoned outputs with a
guard region, and comparison with the float64 reference of each fused op's spec."""

from __future__ import annotations

import zlib

import numpy as np
import torch

TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}
GUARD = 37  # poisoned elements after each output, which the kernel must not touch


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def generator(*key) -> torch.Generator:
    """A generator seeded from the test's parameters: fresh data per case, reproducible failures."""
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def random_rows(rows, cols, dtype, gen, *, row_stride=None, mean=0.0, std=1.0) -> torch.Tensor:
    """A [rows, cols] view whose rows are ``row_stride`` elements apart (contiguous by default)."""
    stride = row_stride or cols
    base = torch.randn(rows * stride + cols, generator=gen, dtype=torch.float64) * std + mean
    return base.to(dtype).to(device()).as_strided((rows, cols), (stride, 1))


def random_vector(n, dtype, gen, *, mean=0.0, std=1.0) -> torch.Tensor:
    return (torch.randn(n, generator=gen, dtype=torch.float64) * std + mean).to(dtype).to(device())


def poisoned(shape, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(output view, its storage): NaN everywhere, with GUARD poisoned elements past the end."""
    numel = int(np.prod(shape))
    storage = torch.full((numel + GUARD,), float("nan"), dtype=dtype, device=device())
    return storage[:numel].view(shape), storage


def assert_written(storage: torch.Tensor, numel: int, what: str) -> None:
    written = storage[:numel]
    assert not torch.isnan(written).any(), f"{what}: {int(torch.isnan(written).sum())} elements not written"
    assert torch.isnan(storage[numel:]).all(), f"{what}: wrote past the end of the output"


def f64(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.detach().double().cpu().numpy()


def assert_matches(out: torch.Tensor, ref: np.ndarray, dtype: torch.dtype, what: str, tol=None) -> None:
    """Relative error ‖out − ref‖ / ‖ref‖ and the largest error, both against the dtype's tolerance."""
    tol = tol or TOLERANCE[dtype]
    got = f64(out)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    assert np.isfinite(got).all(), f"{what}: non-finite values"
    scale = max(float(np.linalg.norm(ref)), 1e-30)
    rel = float(np.linalg.norm(got - ref)) / scale
    worst = float(np.abs(got - ref).max()) if ref.size else 0.0
    bound = 2 * tol * max(1.0, float(np.abs(ref).max()) if ref.size else 0.0)
    assert rel <= tol, f"{what}: relative error {rel:.3g} > {tol:g}"
    assert worst <= bound, f"{what}: max abs error {worst:.3g} > {bound:.3g}"


def assert_same_specials(got: np.ndarray, ref: np.ndarray, dtype: torch.dtype, what: str) -> None:
    """NaN and infinities exactly where the reference, stored in ``dtype``, has them; the rest
    close to it (within the dtype's tolerance, relative and absolute)."""
    with np.errstate(over="ignore"):
        stored = f64(torch.from_numpy(ref).to(dtype))
    for name, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        wrong = np.flatnonzero(test(got) != test(stored))
        assert not wrong.size, (
            f"{what}: {name} differs at {wrong[:8]}: got {got.flat[wrong[:8]]}, want {stored.flat[wrong[:8]]}"
        )
    finite = np.isfinite(stored)
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(got[finite], stored[finite], rtol=tol, atol=tol, err_msg=what)
