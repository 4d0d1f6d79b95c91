"""The torch backend's side of "never more work": the optimized program calls no more ops than the
original, and no more of any one op (views excepted, which horizontal fusion adds; graphopt's fused ops
excepted), so a recognized GELU, norm or linear that no fusion took goes back as the program had it.

Over the test zoo's exported programs and small real architectures (transformers' GPT-2, BERT and T5's
encoder, random weights), as exported and after run_decompositions().
"""

from collections import Counter

import pytest
import torch

import graphopt
from models import zoo

VIEWS = ("aten.view", "aten.reshape", "aten._unsafe_view")
# Where N embedding bags become one (batch_embedding_bags): the one bag on the joined table, and the
# arithmetic that keeps each feature's indices in its own rows, may grow; the total still shrinks.
BATCHED_LOOKUP_OPS = (
    "aten._embedding_bag",
    "aten.lt",
    "aten.where",
    "aten.add",
    "aten.cat",
    "aten.unsqueeze",
)


# One view in two spellings, counted as one family: what decompositions write as permute, programs write
# as transpose, and a transpose graphopt moves (past a fused activation) is written as permute.
FAMILIES = {"aten.transpose.int": "aten.permute|transpose", "aten.permute.default": "aten.permute|transpose"}
# Slices that tile a tensor along one axis are one split (join_slices_into_split): views either way.
FAMILIES |= {op: "aten.slice|split" for op in ("aten.slice.Tensor", "aten.split_with_sizes.default")}


def calls(program) -> Counter:
    return Counter(
        FAMILIES.get(str(node.target), str(node.target))
        for node in program.graph.nodes
        if node.op == "call_function" and "getitem" not in str(node.target)
    )


def assert_no_more_work(program, may_grow: tuple[str, ...] = ()) -> None:
    optimized, _ = graphopt.optimize(
        program, verify=False
    )  # (numerics are checked where each pass is tested)
    before, after = calls(program), calls(optimized)
    assert sum(after.values()) <= sum(before.values()), f"calls {dict(after)}, was {dict(before)}"
    grown = {
        op: (before[op], count)
        for op, count in after.items()
        if not op.startswith(("graphopt.", *VIEWS, *may_grow)) and count > before[op]
    }
    assert not grown, f"more calls of these ops (before, after): {grown}"


def _param(entry):
    marks = [pytest.mark.slow] if "decomposed" in entry.name else []
    return pytest.param(entry, id=entry.name, marks=marks)


# (per_feature_split_linear: its N linears batch into one matmul + add, "more" of each; see
# test_ort_sees_no_more_nodes.)
ZOO = [_param(e) for e in zoo.exported_programs() if not e.name.startswith("per_feature_split_linear.")]


@pytest.mark.parametrize("entry", ZOO)
def test_zoo(entry):
    assert_no_more_work(entry.build(), BATCHED_LOOKUP_OPS if "embedding_bag" in entry.tags else ())


REAL = [("hf_gpt2", "exported"), ("hf_bert", "decomposed"), ("hf_t5_encoder", "exported")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "form"), REAL, ids=[f"{n}.{f}" for n, f in REAL])
def test_real_architecture(name, form):
    from bench.coverage import architectures

    built = architectures.build(name)
    program = torch.export.export(built.module, built.args)
    assert_no_more_work(program.run_decompositions() if form == "decomposed" else program)
