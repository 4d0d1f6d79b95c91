import pytest

from graphopt.ir import DType, Graph, Op, format_graph, op_counts, verify
from graphopt.rewrite import Decline, Fail, Rule, apply_rules, op


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
