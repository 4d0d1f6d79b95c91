import pytest

from graphopt.analysis import format_graph, op_counts, verify
from graphopt.ir import DType, Graph, Op
from graphopt.rewrite import Decline, Either, Fail, Rule, apply_rules, op, why_kept


def relu_tanh_graph(extra_reader=False):
    graph = Graph()
    x = graph.add_input("x", DType.FLOAT32, (3,))
    relu = graph.add_node(Op.RELU, [x], name="relu")
    tanh = graph.add_node(Op.TANH, [relu.output], name="tanh")
    outputs = [tanh.output]
    if extra_reader:
        outputs.append(graph.add_node(Op.EXP, [relu.output], name="exp").output)
    graph.set_outputs(outputs)
    return graph


def pattern(x):
    return op.tanh(op.relu(x))


def replace(b, match):
    return b.sigmoid(match["x"])


def test_rewrite_replaces_the_root_keeps_its_name_and_records_the_rule():
    graph = relu_tanh_graph()
    stats = apply_rules(graph, [Rule("relu_tanh", pattern, replace)])
    assert stats.counts == {"relu_tanh": 1}
    assert op_counts(graph) == {"sigmoid": 1}
    (node,) = graph.nodes
    assert node.meta["rule"] == "relu_tanh"
    assert graph.outputs[0].name == "tanh"
    verify(graph)


def test_intermediate_read_elsewhere_is_a_near_miss_and_nothing_changes():
    graph = relu_tanh_graph(extra_reader=True)
    before = format_graph(graph)
    stats = apply_rules(graph, [Rule("relu_tanh", pattern, replace)])
    assert stats.counts == {}
    assert [m.reason for m in stats.near_misses] == ["'relu' is also read by exp 'exp'"]
    assert format_graph(graph) == before


def test_check_reason_is_reported():
    graph = relu_tanh_graph()
    stats = apply_rules(graph, [Rule("relu_tanh", pattern, replace, lambda m: Fail("not today"))])
    assert [(m.rule, m.node, m.reason) for m in stats.near_misses] == [("relu_tanh", "tanh", "not today")]


def test_declined_replace_leaves_no_trace():
    graph = relu_tanh_graph()
    before = format_graph(graph)

    def half_built(b, match):
        b.sigmoid(match["x"])
        raise Decline("changed my mind")

    stats = apply_rules(graph, [Rule("relu_tanh", pattern, half_built)])
    assert format_graph(graph) == before
    assert stats.near_misses[0].reason == "changed my mind"


def test_rules_run_to_a_fixed_point():
    graph = Graph()
    x = graph.add_input("x", DType.FLOAT32, (3,))
    value = x
    for _ in range(4):
        value = graph.add_node(Op.NEG, [value]).output
    graph.set_outputs([value])
    double_neg = Rule("double_neg", lambda x: op.neg(op.neg(x)), lambda b, m: m["x"])
    stats = apply_rules(graph, [double_neg])
    assert stats.counts == {"double_neg": 2}
    assert len(graph) == 0
    assert graph.outputs == [x]


@pytest.mark.parametrize("returned", [1, 3])
def test_replace_must_return_one_value_per_output(returned):
    graph = relu_tanh_graph()

    def wrong(b, match):
        return [b.sigmoid(match["x"])] * returned

    if returned == 1:
        apply_rules(graph, [Rule("ok", pattern, wrong)])
    else:
        with pytest.raises(Exception, match="returned 3 values for 1 outputs"):
            apply_rules(graph, [Rule("bad", pattern, wrong)])


def test_a_rule_with_alternatives_counts_each_under_its_tagged_name():
    graph = Graph()
    x = graph.add_input("x", DType.FLOAT32, (3,))
    a = graph.add_node(Op.TANH, [graph.add_node(Op.RELU, [x]).output]).output
    b = graph.add_node(Op.TANH, [graph.add_node(Op.NEG, [x]).output]).output
    c = graph.add_node(Op.TANH, [graph.add_node(Op.NEG, [x]).output]).output
    graph.set_outputs([a, b, c])
    rule = Rule(
        "tanh_of[{inner}]",
        lambda x: op.tanh(Either("inner", relu=op.relu(x), neg=op.neg(x))),
        lambda b, m: b.sigmoid(m["x"]),
    )
    stats = apply_rules(graph, [rule])
    assert stats.counts == {"tanh_of[relu]": 1, "tanh_of[neg]": 2}
    assert sorted(n.meta["rule"] for n in graph) == ["tanh_of[neg]", "tanh_of[neg]", "tanh_of[relu]"]
    verify(graph)


def test_why_kept_names_a_graph_output_or_an_outside_reader():
    graph = relu_tanh_graph(extra_reader=True)
    relu, tanh, exp = graph.nodes
    assert why_kept(graph, relu.outputs, [relu, tanh]) == "'relu' is also read by exp 'exp'"
    assert why_kept(graph, relu.outputs, [relu, tanh, exp]) is None
    assert why_kept(graph, tanh.outputs, [tanh]) == "'tanh' is a graph output"
