import numpy as np
import pytest

from graphopt.analysis import format_graph
from graphopt.ir import DType, Graph, Op, Tensor
from graphopt.rewrite import Rule, apply_rules, op
from graphopt.rewrite.scalars import holds_number, scalar_operand


@pytest.mark.parametrize(
    ("found", "number", "dtype", "holds"),
    [
        (2.0, 2.0, DType.FLOAT32, True),
        (2, 2.0, DType.INT64, True),
        (float(np.float32(2.0000005)), 2.0, DType.FLOAT32, False),
        (3.0000002, 3.0, DType.FLOAT64, False),
        (0.5000001, 0.5, DType.FLOAT32, False),
        (float(np.float32(0.044715)), 0.044715, DType.FLOAT32, True),
        (float(np.float16(0.044715)), 0.044715, DType.FLOAT16, True),
        (0.044715, 0.044715, DType.FLOAT64, True),
        (0.0447, 0.044715, DType.FLOAT32, False),
    ],
)
def test_a_literal_matches_exactly_or_within_one_rounding(found, number, dtype, holds):
    assert holds_number(found, number, dtype) is holds


def add_graph(x_shape, constant_shape):
    graph = Graph()
    x = graph.add_input("x", DType.FLOAT32, x_shape)
    one = graph.add_constant(Tensor.from_array(np.ones(constant_shape, np.float32)), "one")
    add = graph.add_node(Op.ADD, [x, one], name="add")
    graph.set_outputs([graph.add_node(Op.RELU, [add.output], name="relu").output])
    return graph, add, one


@pytest.mark.parametrize(
    ("x_shape", "constant_shape", "acts_as_scalar"),
    [
        ((4, 8), (), True),
        ((4, 8), (1,), True),
        ((4, 8), (1, 1), True),
        ((4, 8), (1, 1, 1), False),
        ((4, 8), (8,), False),
        (None, (1,), False),
        (None, (), True),
    ],
)
def test_a_one_element_constant_is_a_scalar_only_where_it_adds_no_dims(
    x_shape, constant_shape, acts_as_scalar
):
    _, add, one = add_graph(x_shape, constant_shape)
    assert (scalar_operand(one, add) is not None) is acts_as_scalar


def drop_add_of_one(x):
    return op.relu(op.add(x, 1.0))


def relu_of_x(b, match):
    return b.relu(match["x"])


def test_a_literal_of_higher_rank_is_no_match():
    graph, _, _ = add_graph((4, 8), (1, 1, 1))
    before = format_graph(graph)
    stats = apply_rules(graph, [Rule("drop_add_of_one", drop_add_of_one, relu_of_x)])
    assert stats.counts == {}
    assert format_graph(graph) == before


def test_a_replacement_of_another_rank_is_declined():
    graph, _, _ = add_graph((4, 8), (1, 1, 1))
    before = format_graph(graph)

    def any_add(x, c):
        return op.relu(op.add(x, c))

    stats = apply_rules(graph, [Rule("drop_any_add", any_add, relu_of_x)])
    assert stats.counts == {}
    assert [m.reason for m in stats.near_misses] == [
        "rule drop_any_add would change 'relu': its shape [1, 4, 8] would become [4, 8]"
    ]
    assert format_graph(graph) == before
