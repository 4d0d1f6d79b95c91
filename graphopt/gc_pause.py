"""Python's cycle collector paused while a graph is built, rewritten and written back.

Loading a 50,000-node model creates a few hundred thousand objects (nodes, values, uses, protobuf
wrappers) that all live until the end; the collector, triggered by allocation counts, walks the
whole growing heap again and again for garbage that is not there: a third of the load time at that
size. Reference counting still frees everything acyclic; erased nodes and values, which reference
each other, wait for the collector's next run after the pause.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
