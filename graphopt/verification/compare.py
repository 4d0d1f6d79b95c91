"""Do two model files compute the same outputs? The check behind ``graphopt verify``.

Both are loaded (which validates them), run on the same inputs (random ones that fit ORIGINAL's
inputs, or given arrays) and compared output by output with per-dtype tolerances.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadInput

if TYPE_CHECKING:  # (the CLI imports this module at start-up; the model libraries load on use)
    from ..files import model_files
    from .checking import Inputs


def verify_models(
    original: str | Path,
    optimized: str | Path,
    *,
    inputs: Inputs | None = None,
    seed: int = 0,
    input_shapes=None,
    tolerances=None,
    trust_pickle: bool = False,
    other_outputs: Mapping[str, str | os.PathLike] | None = None,
) -> dict[str, Any]:
    """The verdict (JSON-ready) of comparing two model files of one kind; BadInput if they are not
    usable or not comparable. ``trust_pickle``: load .pt2 archives that would unpickle objects.
    ``other_outputs``: files the caller will write, refused if either model reads them."""
    from ..files import model_files
    from ..frontends.pt2_pickles import pickle_trust
    from .checking import Reference, prepare_draws

    with pickle_trust(trust_pickle):
        first = model_files.load(original)
        second = model_files.load(optimized)
    for source in (first, second):
        model_files.refuse_input_files(source, dict(other_outputs or {}))
    if first.frontend != second.frontend:
        kinds = {"onnx": "an ONNX model", "torch": "a torch.export archive"}
        raise BadInput(
            f"{original} is {kinds[first.frontend]} and {optimized} is {kinds[second.frontend]}; "
            "expected two models of one kind"
        )
    _check_interfaces(first, second)
    draws = prepare_draws(first.graph, inputs=inputs, seed=seed, input_shapes=input_shapes)
    # One model's weights at a time: the second graph is dropped before anything runs.
    candidate = second.original
    del second
    reference = Reference.of(first, draws, tolerances)
    del first
    verdict = reference.check(candidate)
    verdict["inputs"] = reference.describe_inputs()
    verdict["seed"] = seed
    return verdict


def _check_interfaces(first: model_files.Source, second: model_files.Source) -> None:
    want = {v.name: v.dtype for v in first.graph.inputs}
    got = {v.name: v.dtype for v in second.graph.inputs}
    if set(want) != set(got):
        raise BadInput(
            f"{second.label} has inputs {sorted(got)} but {first.label} has {sorted(want)}; "
            "expected the same inputs"
        )
    for name, dtype in want.items():
        if got[name] != dtype:
            raise BadInput(f"input {name!r} is {dtype} in {first.label} but {got[name]} in {second.label}")
