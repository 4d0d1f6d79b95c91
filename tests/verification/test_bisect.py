import numpy as np
import pytest
import torch
from broken_pass import PASS_NAME, RULE, TanhChain, tanh_chain

import graphopt
from graphopt import VerificationError
from graphopt.rewrite import Pass, RewriteStats
from graphopt.verification.bisection import Culprit, _first_true

EXPECTED = f"rule {RULE} at node 't3' (pass {PASS_NAME}, rewrite 3 of 5)"


def test_mismatch_names_the_rule_node_and_pass(broken_pipeline, tmp_path):
    target = tmp_path / "out.onnx"
    with pytest.raises(VerificationError) as caught:
        graphopt.optimize(tanh_chain(), output=target)
    assert EXPECTED in str(caught.value)
    culprit = caught.value.report.verification["culprit"]
    assert culprit == {
        "pass": PASS_NAME,
        "rule": RULE,
        "node": "t3",
        "rewrite": 3,
        "rewrites": 5,
        "description": EXPECTED,
    }
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_exported_program_mismatch_is_bisected_in_torch(broken_pipeline):
    program = torch.export.export(TanhChain(), (torch.randn(2, 8),))
    with pytest.raises(
        VerificationError, match=r"rule retanh at node 'tanh_2' \(pass rewrite_tanh, rewrite 3 of 5\)"
    ):
        graphopt.optimize(program)


def test_force_writes_and_reports_the_culprit(broken_pipeline, tmp_path):
    target = tmp_path / "out.onnx"
    _, report = graphopt.optimize(tanh_chain(), output=target, force=True)
    assert target.exists()
    assert not report.verification["ok"]
    assert report.verification["culprit"]["node"] == "t3"
    assert any(EXPECTED in note and "--force" in note for note in report.notes)
    assert report.to_json()["verification"]["culprit"]["rule"] == RULE


def test_bisection_can_be_turned_off(broken_pipeline):
    with pytest.raises(VerificationError) as caught:
        graphopt.optimize(tanh_chain(), bisect=False)
    assert "first wrong rewrite" not in str(caught.value)
    assert "culprit" not in caught.value.report.verification


def test_a_pass_that_does_not_count_its_rewrites_is_named_alone(monkeypatch):
    from graphopt import pipeline

    def negate_output(graph) -> RewriteStats:
        from graphopt.ir import Op

        out = graph.outputs[0]
        node = graph.add_node(Op.NEG, [out], {}, outputs=[("negated", out.dtype, out.shape)])
        graph.set_outputs([node.output])
        return RewriteStats()

    rogue = Pass("negate_output", "Negates the output (wrong).", negate_output)
    monkeypatch.setattr(pipeline, "PIPELINE", (*pipeline.PIPELINE[:3], rogue, *pipeline.PIPELINE[3:]))
    with pytest.raises(VerificationError, match=r"first wrong rewrite: pass negate_output$"):
        graphopt.optimize(tanh_chain())


def test_no_culprit_when_the_pipeline_is_right():
    _, report = graphopt.optimize(tanh_chain())
    assert report.verification["ok"]
    assert "culprit" not in report.verification


@pytest.mark.parametrize("boundary", [1, 2, 7, 13, 14])
def test_first_true_finds_the_boundary(boundary):
    calls = []

    def predicate(n):
        calls.append(n)
        return n >= boundary

    assert _first_true(1, 14, predicate) == boundary
    assert len(calls) <= 4  # log2(14), rounded up


def test_culprit_descriptions():
    assert Culprit(None).describe().startswith("the round trip with no pass")
    assert Culprit("fold_constants").describe() == "pass fold_constants"
    full = Culprit("fuse_norm_act", "fuse_norm_act", "ln_1", 2, 9)
    assert full.describe() == "rule fuse_norm_act at node 'ln_1' (pass fuse_norm_act, rewrite 2 of 9)"
    assert full.to_json()["rewrites"] == 9


def test_outputs_are_checked_on_the_given_arrays():
    x = np.full((2, 8), 0.5, np.float32)
    _, report = graphopt.optimize(tanh_chain(), inputs={"x": x})
    assert report.verification["ok"]
    assert report.verification["inputs"] == {"x": {"dtype": "float32", "shape": [2, 8]}}
