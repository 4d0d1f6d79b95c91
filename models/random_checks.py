"""What must hold for every random program, shared by the property tests and the long runs.

* the optimized model computes what the original computes (the numeric check of ``optimize``, on
  each of its draws: standard-normal inputs, rows with a large common offset, large magnitudes and
  constant rows; see graphopt/verification/draws.py), and on inputs with NaN and infinities
  (models/random_draws.py), and ``verify(graph)`` holds after every pass
  (``check_each_pass``);
* optimizing the optimized model gives the same model again (the same ops, attributes included).
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import onnx

import graphopt
from graphopt.files import model_files
from graphopt.verification.checking import Reference
from graphopt.verification.numeric import input_specs
from models.random_draws import adversarial_draws
from models.random_program import Program

# The fused ops accumulate in float32 where the original computes a spelled-out float16 norm step by
# step; the two differ by a few float16 steps (up to about 2e-2 over the random programs).
TOLERANCES = {"float16": (3e-2, 3e-2)}


def build(program: Program, form: str) -> Any:
    """The program as an onnx.ModelProto (``form`` "onnx") or an ExportedProgram ("torch")."""
    if form == "onnx":
        from models.random_onnx import to_onnx

        return to_onnx(program)
    from models.random_torch import to_exported_program

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_exported_program(program)


def optimize_checked(model: Any, **options: Any):
    """Optimizes with the numeric check and verify(graph) after every pass; both raise on a failure.
    ``options`` go to graphopt.optimize (``seed``: of the check's inputs)."""
    optimized, report = graphopt.optimize(model, check_each_pass=True, tolerances=TOLERANCES, **options)
    assert report.verification["ok"], report.verification["summary"]
    return optimized, report


def ops(model: Any) -> Counter:
    """The model's operations, ignoring names and order: (domain, op, attributes) of each ONNX node,
    or the target of each call in an ExportedProgram."""
    if isinstance(model, onnx.ModelProto):
        return Counter(
            (
                node.domain,
                node.op_type,
                tuple(sorted((a.name, str(onnx.helper.get_attribute_value(a))) for a in node.attribute)),
            )
            for node in model.graph.node
        )
    return Counter(str(node.target) for node in model.graph.nodes if node.op == "call_function")


def check_adversarial(original: Any, optimized: Any, seed: int = 0) -> None:
    """The optimized model against the original on the draws of models/random_draws.py."""
    source = model_files.load(original)
    draws = adversarial_draws(input_specs(source.graph), seed)
    if not draws:
        return
    reference = Reference.of(source, draws, TOLERANCES)
    verdict = reference.check(optimized)
    assert verdict["ok"], verdict["summary"]


def check_idempotent(once: Any, seed: int = 0) -> None:
    twice, _ = optimize_checked(once, seed=seed)
    first, second = ops(once), ops(twice)
    assert first == second, f"optimizing again changes {dict(first - second)} into {dict(second - first)}"


def check_program(program: Program, form: str, *, idempotence: bool = True) -> dict[str, int]:
    """Raises AssertionError (or the optimizer's error) when a property fails; returns the rule counts."""
    # Each program's check draws its own inputs (the seed of its weights), so a long run meets
    # many inputs of every kind rather than one set per shape.
    original = build(program, form)
    once, report = optimize_checked(original, seed=program.seed)
    check_adversarial(original, once, program.seed)
    if idempotence:
        check_idempotent(once, program.seed)
    return report.rule_counts
