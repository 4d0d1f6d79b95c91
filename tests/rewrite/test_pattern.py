import numpy as np

from graphopt.ir import DType, Graph, Op, Tensor
from graphopt.rewrite import Either, match, op
from graphopt.rewrite.pattern import build_pattern


def graph_with(builder):
    graph = Graph()
    x = graph.add_input("x", DType.FLOAT32, (2, 4))
    out = builder(graph, x)
    graph.set_outputs([out])
    return graph, x, out


def test_pattern_binds_inputs_and_named_nodes():
    def build(g, x):
        return g.add_node(Op.TANH, [g.add_node(Op.LAYER_NORM, [x], {"axis": 1, "eps": 0.0}).output]).output

    _, x, out = graph_with(build)

    def pattern(x):
        return op.tanh(op.layer_norm(x, ...).named("norm"))

    found = match(build_pattern(pattern), out.producer)
    assert found is not None
    assert found["x"] is x
    assert found.node("norm").op == Op.LAYER_NORM
    assert len(found.matched) == 2


def test_commutative_inputs_match_either_order():
    def build(g, x):
        half = g.add_node(Op.CONSTANT, [], {"value": Tensor.from_array(np.float32(0.5))}).output
        return g.add_node(Op.MUL, [half, x]).output

    _, x, out = graph_with(build)
    found = match(build_pattern(lambda x: op.mul(x, 0.5)), out.producer)
    assert found is not None and found["x"] is x


def test_literal_must_equal_the_constant():
    def build(g, x):
        c = g.add_node(Op.CONSTANT, [], {"value": Tensor.from_array(np.float32(0.25))}).output
        return g.add_node(Op.MUL, [x, c]).output

    _, _, out = graph_with(build)
    assert match(build_pattern(lambda x: op.mul(x, 0.5)), out.producer) is None


def test_shared_subpattern_must_be_the_same_node():
    def build(g, x):
        a = g.add_node(Op.SIGMOID, [x]).output
        b = g.add_node(Op.SIGMOID, [x]).output
        return g.add_node(Op.MUL, [a, b]).output

    _, _, out = graph_with(build)

    def pattern(x):
        s = op.sigmoid(x)
        return op.mul(s, s)

    assert match(build_pattern(pattern), out.producer) is None


def test_variable_bound_twice_must_be_the_same_value():
    def build(g, x):
        y = g.add_input("y", DType.FLOAT32, (2, 4))
        return g.add_node(Op.MUL, [x, g.add_node(Op.SIGMOID, [y]).output]).output

    _, _, out = graph_with(build)
    assert match(build_pattern(lambda x: op.mul(x, op.sigmoid(x))), out.producer) is None


def test_attribute_constraints():
    def build(g, x):
        return g.add_node(Op.GELU, [x], {"approximate": "tanh"}).output

    _, _, out = graph_with(build)
    assert match(build_pattern(lambda x: op.gelu(x, approximate="none")), out.producer) is None
    assert match(build_pattern(lambda x: op.gelu(x, approximate="tanh")), out.producer) is not None


def test_either_matches_each_alternative_and_names_the_one_taken():
    def pattern(x):
        return Either("form", tanh=op.tanh(op.relu(x)), sigmoid=op.sigmoid(op.neg(x)))

    def build_tanh(g, x):
        return g.add_node(Op.TANH, [g.add_node(Op.RELU, [x]).output]).output

    def build_sigmoid(g, x):
        return g.add_node(Op.SIGMOID, [g.add_node(Op.NEG, [x]).output]).output

    def build_neither(g, x):
        return g.add_node(Op.TANH, [g.add_node(Op.NEG, [x]).output]).output

    root = build_pattern(pattern)
    assert root.ops == {Op.TANH, Op.SIGMOID}
    for build, form in ((build_tanh, "tanh"), (build_sigmoid, "sigmoid")):
        _, x, out = graph_with(build)
        found = match(root, out.producer)
        assert found is not None and found["x"] is x and found.tags == {"form": form}
        assert len(found.matched) == 2
    _, _, out = graph_with(build_neither)
    assert match(root, out.producer) is None


def test_either_met_twice_takes_the_same_alternative():
    def pattern(x):
        inner = Either("act", relu=op.relu(x), tanh=op.tanh(x))
        return op.sub(inner, inner)

    def build(g, x):
        return g.add_node(Op.SUB, [g.add_node(Op.RELU, [x]).output, g.add_node(Op.TANH, [x]).output]).output

    def build_shared(g, x):
        shared = g.add_node(Op.TANH, [x]).output
        return g.add_node(Op.SUB, [shared, shared]).output

    _, _, out = graph_with(build)
    assert match(build_pattern(pattern), out.producer) is None
    _, _, out = graph_with(build_shared)
    found = match(build_pattern(pattern), out.producer)
    assert found is not None and found.tags == {"act": "tanh"}


def test_optional_input_matches_an_absent_and_a_present_input():
    def pattern(x, scale=None):
        return op.tanh(op.layer_norm(x, scale).named("norm"))

    def build(with_scale):
        def build_graph(g, x):
            inputs = [x, g.add_input("w", DType.FLOAT32, (4,))] if with_scale else [x]
            norm = g.add_node(Op.LAYER_NORM, inputs, {"axis": 1, "eps": 0.0})
            return g.add_node(Op.TANH, [norm.output]).output

        return build_graph

    root = build_pattern(pattern)
    _, x, out = graph_with(build(False))
    found = match(root, out.producer)
    assert found is not None and found["x"] is x and found["scale"] is None
    _, x, out = graph_with(build(True))
    found = match(root, out.producer)
    assert found is not None and found["scale"].name == "w"
    assert match(build_pattern(lambda x, scale: op.tanh(op.layer_norm(x, scale))), out.producer) is not None


def test_a_required_input_must_be_there():
    def build(g, x):
        return g.add_node(Op.TANH, [g.add_node(Op.LAYER_NORM, [x], {"axis": 1, "eps": 0.0}).output]).output

    _, _, out = graph_with(build)
    assert match(build_pattern(lambda x, scale: op.tanh(op.layer_norm(x, scale))), out.producer) is None
