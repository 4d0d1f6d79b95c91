from broken_pass import tanh_chain
from graphopt.passes.canonicalize import fold_constants

from graphopt.frontends.onnx import from_onnx
from graphopt.ir import Op
from graphopt.rewrite import Rule, apply_rules, op, rewrite_budget


def _to_sigmoid():
    return Rule("tanh_to_sigmoid", lambda x: op.tanh(x), lambda b, m: b.node(Op.SIGMOID, m["x"]).output)


def _ops(graph):
    return [node.op for node in graph]


def test_a_budget_stops_the_driver_after_n_rewrites_and_names_the_last():
    graph = from_onnx(tanh_chain(5))
    with rewrite_budget(2) as budget:
        stats = apply_rules(graph, [_to_sigmoid()])
    assert stats.counts["tanh_to_sigmoid"] == 2
    assert _ops(graph).count(Op.SIGMOID) == 2
    assert _ops(graph).count(Op.TANH) == 3
    assert budget.done == 2
    assert budget.last == ("tanh_to_sigmoid", "t2")


def test_no_budget_means_no_limit_and_an_unlimited_budget_counts():
    graph = from_onnx(tanh_chain(5))
    with rewrite_budget() as budget:
        apply_rules(graph, [_to_sigmoid()])
    assert budget.done == 5
    assert _ops(graph).count(Op.TANH) == 0
    graph = from_onnx(tanh_chain(5))
    assert apply_rules(graph, [_to_sigmoid()]).counts["tanh_to_sigmoid"] == 5


def test_a_zero_budget_rewrites_nothing():
    graph = from_onnx(tanh_chain(5))
    with rewrite_budget(0):
        stats = apply_rules(graph, [_to_sigmoid()])
    assert not stats.counts
    assert _ops(graph).count(Op.TANH) == 5


def test_constant_folding_takes_part_in_the_budget():
    import onnx
    from onnx import helper

    model = tanh_chain(1)
    # scale2 = Neg(scale), Neg(scale2): two foldable nodes between the weight and the Mul.
    model.graph.node.insert(0, helper.make_node("Neg", ["scale"], ["scale_neg"], name="neg1"))
    model.graph.node.insert(1, helper.make_node("Neg", ["scale_neg"], ["scale_pos"], name="neg2"))
    model.graph.node[-1].input[1] = "scale_pos"
    onnx.checker.check_model(model)
    graph = from_onnx(model)
    with rewrite_budget(1) as budget:
        fold_constants.PASS.run(graph)
    assert budget.last == ("fold_constant", "neg1")
    assert "neg2" in {node.name for node in graph}
