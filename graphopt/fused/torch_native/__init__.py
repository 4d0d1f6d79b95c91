"""Eager CUDA calls of the fused ops in C++: no Python between the caller and the kernel launch.

Why and how: ``dispatch.cc``. ``activate(kernels)`` runs once per process, on the first eager CUDA
call of a fused op (or when called): it builds the library for this PyTorch or finds it cached
(``build.py``), binds each op's fast path to its C entry in libgraphopt_ort, registers each such op's
Python kernels for the CUDA and AutogradCUDA keys on a copy of the op in namespace ``graphopt_eager``
(where the C++ kernel sends the calls it does not take), and registers the C++ kernel on the op.
Where anything is missing (no C++ compiler, a libgraphopt_ort without CUDA kernels, or
``GRAPHOPT_TORCH_NATIVE=0``), the Python kernels stay in charge and the log says why, once.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Callable
from typing import ClassVar

import torch

log = logging.getLogger(__name__)

ENV = "GRAPHOPT_TORCH_NATIVE"
NAMESPACE = "graphopt_eager"


# Per op form, by name: registers its Python kernels for the CUDA and AutogradCUDA keys in a library
# (of any namespace: the op forms keep their names).
PythonKernels = Callable[[torch.library.Library], None]


class _State:
    tried = False
    lock = threading.Lock()  # (two threads' first CUDA calls switch once)
    active: tuple[str, ...] = ()
    why_not = ""
    # graphopt_eager's library and the C++ library: they live as long as the process
    libraries: ClassVar[list] = []


def active_ops() -> tuple[str, ...]:
    """The op forms whose eager CUDA calls run in C++ (empty before ``activate`` or where it failed)."""
    return _State.active


def why_inactive() -> str:
    """Why ``activate`` left the Python kernels in charge ("" if it did not, or has not run)."""
    return _State.why_not


def activate(kernels: dict[str, PythonKernels]) -> tuple[str, ...]:
    """Puts the C++ kernel in front of every op form of ``kernels`` (by name) that has a fast path;
    once per process (later calls return the first call's result). Returns the op forms switched."""
    if _State.tried:
        return _State.active
    with _State.lock:
        if _State.tried:
            return _State.active
        if os.environ.get(ENV, "1") == "0":
            _State.why_not = f"{ENV}=0"
        else:
            try:
                _State.active = _switch(kernels)
            except Exception as error:  # a missing compiler or library: the Python kernels do the work
                _State.why_not = str(error)
                log.warning("graphopt: eager CUDA calls stay in Python (%s)", error)
        _State.tried = True
    return _State.active


def _switch(kernels: dict[str, PythonKernels]) -> tuple[str, ...]:
    from graphopt.fused.torch_native import build
    from graphopt.ort import library_path

    ort_library = library_path()
    native = ctypes.CDLL(str(build.built_library(log=log.warning)))
    message = ctypes.create_string_buffer(4096)
    found = native.graphopt_torch_native_bind(ort_library.encode(), message, len(message))
    if found < 0:
        raise RuntimeError(f"{ort_library} did not open: {message.value.decode(errors='replace')}")
    names = [n for n in message.value.decode().split(",") if n in kernels]
    if not names:
        raise RuntimeError(f"{ort_library} has no CUDA kernels for PyTorch's eager calls")
    copies = torch.library.Library(NAMESPACE, "DEF")
    _State.libraries += [copies, native]
    switched = []
    for name in names:
        schema = getattr(torch.ops.graphopt, name).default._schema
        copies.define(str(schema).split("::", 1)[1])
        kernels[name](copies)
        if native.graphopt_torch_native_register(name.encode(), message, len(message)) != 0:
            log.warning("graphopt: %s's eager CUDA calls stay in Python (%s)", name, message.value.decode())
            continue
        switched.append(name)
    return tuple(switched)
