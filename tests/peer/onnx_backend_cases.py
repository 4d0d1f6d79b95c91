"""The ONNX backend test models, run through graphopt and ONNX Runtime.

The node tests are generated from the installed ``onnx`` package's own test-case definitions (its wheel
ships no node data); the ``simple``, ``pytorch-converted`` and ``pytorch-operator`` suites are read from
the data folders the wheel ships. Every model is optimized with the numeric check off, and the original
and the optimized model run in ONNX Runtime on CPU against the expected outputs.

``python tests/peer/onnx_backend_cases.py [suite ...]`` prints every model's outcome.
"""

from __future__ import annotations

import collections
import contextlib
import io
import logging
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper

import graphopt
from graphopt.errors import BadInput

SUITES = ("node", "simple", "pytorch-converted", "pytorch-operator")
FAILURES = ("mismatch", "crash", "refused")

# Ops whose outputs are drawn at random: no run reproduces the recorded outputs.
NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial"}
)
GRAPHOPT_DOMAIN = "graphopt"


@dataclass
class Case:
    name: str
    model: onnx.ModelProto
    data_sets: list[tuple[list, list]]
    rtol: float
    atol: float


@dataclass
class Outcome:
    name: str
    status: str  # "ok", "skip", or one of FAILURES
    reason: str = ""


def cases(suite: str) -> list[Case]:
    return node_cases() if suite == "node" else data_dir_cases(suite)


def node_cases() -> list[Case]:
    """The node tests, built by running the onnx package's definitions (expected outputs included)."""
    from onnx.backend.test.case import node

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        collected = node.collect_testcases()
    return [
        Case(case.name, case.model, [(list(i), list(o)) for i, o in case.data_sets], case.rtol, case.atol)
        for case in collected
    ]


def data_dir_cases(suite: str) -> list[Case]:
    """A suite the onnx wheel ships as folders of model.onnx and test_data_set_*/{input,output}_*.pb."""
    root = Path(onnx.__file__).parent / "backend" / "test" / "data" / suite
    found = []
    for folder in sorted(p for p in root.iterdir() if (p / "model.onnx").is_file()):
        data_sets = [
            (_read_tensors(data, "input"), _read_tensors(data, "output"))
            for data in sorted(folder.glob("test_data_set_*"))
        ]
        # onnx's own backend runner checks these suites with the node tests' tolerances.
        found.append(Case(folder.name, onnx.load(folder / "model.onnx"), data_sets, rtol=1e-3, atol=1e-7))
    return found


def _read_tensors(folder: Path, kind: str) -> list[onnx.TensorProto]:
    tensors = []
    for path in sorted(folder.glob(f"{kind}_*.pb"), key=lambda p: int(p.stem.split("_")[1])):
        tensor = onnx.TensorProto()
        tensor.ParseFromString(path.read_bytes())
        tensors.append(tensor)
    return tensors


def skip_reason(case: Case) -> str | None:
    """Why a model is outside what the suite can check, or None."""
    graph = case.model.graph
    for value in [*graph.input, *graph.output]:
        if not value.type.HasField("tensor_type"):
            return f"non-tensor input or output {value.name!r}"
    random_ops = sorted({node.op_type for node in all_nodes(graph)} & NONDETERMINISTIC)
    if random_ops:
        return f"non-deterministic op {random_ops[0]}"
    for inputs, outputs in case.data_sets:
        if not all(isinstance(a, np.ndarray | np.generic | onnx.TensorProto) for a in [*inputs, *outputs]):
            return "non-tensor test data"
    return None


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """The graph's nodes and those of its subgraphs."""
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attribute.g)
            for sub in attribute.graphs:
                yield from all_nodes(sub)


def check(case: Case, library: str | None = None) -> Outcome:
    """Optimizes one model, then runs the original and the optimized model against the expected outputs.

    Every model is optimized, so a crash counts even where nothing can be run; a refusal counts only
    where ONNX Runtime runs the original. With ``library`` (graphopt's custom-op library), an optimized
    model holding graphopt ops runs both with the library and on its fallback functions.
    """
    given = case.model.SerializeToString()
    try:
        with _quiet():
            optimized, _ = graphopt.optimize(case.model, verify=False)
        refusal = None
    except BadInput as error:
        optimized, refusal = None, _first_line(error)
    except Exception as error:
        return Outcome(case.name, "crash", f"optimize: {type(error).__name__}: {_first_line(error)}")
    if case.model.SerializeToString() != given:
        return Outcome(case.name, "crash", "optimize changed the caller's ModelProto")

    reason = skip_reason(case)
    if reason:
        return Outcome(case.name, "skip", reason)
    try:
        original = _run(case.model, case)
    except Exception as error:
        return Outcome(case.name, "skip", f"ONNX Runtime cannot run it: {_first_line(error)}")
    wrong = _mismatch(case, original)
    if wrong:
        return Outcome(case.name, "skip", f"ONNX Runtime's outputs differ from the expected ones: {wrong}")
    if refusal is not None:
        return Outcome(case.name, "refused", refusal)

    fused = any(node.domain == GRAPHOPT_DOMAIN for node in optimized.graph.node)
    for use_library in (False, True) if fused and library else (False,):
        where = "with graphopt's library" if use_library else "in plain ONNX Runtime"
        try:
            results = _run(optimized, case, library if use_library else None)
        except Exception as error:
            return Outcome(case.name, "crash", f"running the optimized model {where}: {_first_line(error)}")
        wrong = _mismatch(case, results)
        if wrong:
            return Outcome(case.name, "mismatch", f"{where}: {wrong}")
    return Outcome(case.name, "ok")


def run_suite(suite_cases: list[Case], library: str | None = None) -> list[Outcome]:
    return [check(case, library) for case in suite_cases]


def failure_table(outcomes: list[Outcome]) -> str:
    failed = [o for o in outcomes if o.status in FAILURES]
    width = max((len(o.name) for o in failed), default=0)
    rows = [f"{o.status:<9} {o.name:<{width}}  {o.reason}" for o in failed]
    counts = collections.Counter(o.status for o in outcomes)
    return "\n".join([*rows, ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))])


def _as_array(value) -> np.ndarray:
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def _run(model: onnx.ModelProto, case: Case, library: str | None = None) -> list[list[np.ndarray]]:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    if library:
        options.register_custom_ops_library(library)
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    initialized = {t.name for t in model.graph.initializer}
    names = [value.name for value in model.graph.input if value.name not in initialized]
    results = []
    for inputs, _ in case.data_sets:
        feeds = {name: _as_array(value) for name, value in zip(names, inputs, strict=False)}
        results.append(session.run(None, feeds))
    return results


def _mismatch(case: Case, results: list[list[np.ndarray]]) -> str | None:
    for (_, expected), outputs in zip(case.data_sets, results, strict=True):
        if len(outputs) != len(expected):
            return f"{len(outputs)} outputs, expected {len(expected)}"
        for index, (want, have) in enumerate(zip(expected, outputs, strict=True)):
            want, have = _as_array(want), np.asarray(have)
            if want.shape != have.shape:
                return f"output {index} has shape {have.shape}, expected {want.shape}"
            if want.dtype != have.dtype:
                return f"output {index} has dtype {have.dtype}, expected {want.dtype}"
            if want.dtype.kind in "fc":
                close = np.isclose(have, want, rtol=case.rtol, atol=case.atol, equal_nan=True)
            else:
                close = have == want
            if not np.all(close):
                wrong = int(np.size(close) - np.count_nonzero(close))
                return f"output {index}: {wrong} of {np.size(close)} elements differ"
    return None


@contextlib.contextmanager
def _quiet():
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:240]


def main(suites: list[str]) -> None:
    try:
        from graphopt.ort import library_path

        library = library_path()
    except FileNotFoundError:
        library = None
    for suite in suites or SUITES:
        outcomes = run_suite(cases(suite), library)
        print(f"== {suite}")
        for outcome in outcomes:
            print(f"{outcome.status:<9} {outcome.name}  {outcome.reason}")
        print(failure_table(outcomes).splitlines()[-1])


if __name__ == "__main__":
    main(sys.argv[1:])
