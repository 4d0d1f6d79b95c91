"""Launching a compiled Triton kernel from eager PyTorch with less host time than ``kernel[grid](...)``.

Each ``kernel[grid](...)`` call runs Triton's JIT dispatch: it binds and specializes every argument,
builds a cache key string, checks the kernel's globals, then launches (about 9-12 µs per call on
recent Triton, more than the kernel itself takes on small rows). ``cached(kernel)`` returns a
stand-in for the kernel that does this once per variant: the first call of a variant goes through
the JIT (compiling if needed) and keeps the compiled kernel it returns; later calls with arguments
of the same variant launch that compiled kernel directly through its launcher.

A variant is keyed finer than Triton's own specialization, so two calls that share a key always
share Triton's compiled kernel: per tensor its dtype and whether its address is 16-byte aligned, per
integer whether it is 1, a multiple of 16, or beyond 32 bits, the constexpr and launch options as
given, and the current device.
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)

_INT32 = 1 << 31
current_device = torch.cuda.current_device  # (what Triton compiles and launches for)


def cached(kernel) -> CachedLauncher:
    """The cached launcher of a ``@triton.jit`` kernel (one per kernel)."""
    launcher = _LAUNCHERS.get(kernel)
    if launcher is None:
        launcher = _LAUNCHERS[kernel] = CachedLauncher(kernel)
    return launcher


class CachedLauncher:
    def __init__(self, kernel):
        self.kernel = kernel
        self.variants: dict[tuple, LaunchVariant] = {}
        self.broken = False  # the direct launch failed once: use the JIT from then on

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def launch(self, grid, args: tuple, kwargs: dict) -> None:
        if self.broken:
            self.kernel[grid](*args, **kwargs)
            return
        key = (current_device(), _specialization(args), tuple(kwargs.items()))
        variant = self.variants.get(key)
        if variant is None:
            compiled = self.kernel[grid](*args, **kwargs)  # compiles or finds it, and launches
            if compiled is not None:
                self.variants[key] = LaunchVariant(compiled, self._constexpr_positions(kwargs))
            return
        try:
            variant.launch(grid, args, kwargs)
        except TypeError as error:  # this Triton's launcher takes another argument list
            log.warning("launching %s directly failed (%s); using Triton's JIT launch", self.kernel, error)
            self.broken = True
            self.kernel[grid](*args, **kwargs)

    def _constexpr_positions(self, kwargs: dict) -> list[tuple[int, str]]:
        """(parameter position, name) of each constexpr, for the launchers that take them too."""
        names = list(self.kernel.arg_names)
        return sorted((names.index(name), name) for name in kwargs if name in names)


class LaunchVariant:
    """One compiled kernel and how its launcher wants the arguments: all parameters in order
    (constexprs included, as Triton's own JIT passes them since 3.3) or only the others."""

    def __init__(self, compiled, constexprs: list[tuple[int, str]]):
        self.compiled = compiled
        self.constexprs = constexprs
        self.with_constexprs: bool | None = None  # found on the first direct launch

    def launch(self, grid, args: tuple, kwargs: dict) -> None:
        grid = tuple(grid) + (1,) * (3 - len(grid))
        if self.with_constexprs is False:
            self.compiled[grid](*args)
            return
        full = list(args)
        for position, name in self.constexprs:
            full.insert(position, kwargs[name])
        if self.with_constexprs:
            self.compiled[grid](*full)
            return
        # First direct launch: a launcher given the wrong number of arguments raises TypeError
        # while parsing them, before it launches anything.
        try:
            self.compiled[grid](*full)
            self.with_constexprs = True
        except TypeError:
            self.compiled[grid](*args)
            self.with_constexprs = False


def _specialization(args: tuple) -> tuple:
    """Per argument what Triton may specialize on (one comprehension: a function call per argument
    costs more than the test itself, and this runs on every launch)."""
    return tuple([
        (a == 1, not a % 16, -_INT32 <= a < _INT32) if type(a) is int
        else (a.dtype, not a.data_ptr() % 16) if isinstance(a, torch.Tensor)
        else float if type(a) is float
        else a
        for a in args
    ])  # fmt: skip


_LAUNCHERS: dict[object, CachedLauncher] = {}
