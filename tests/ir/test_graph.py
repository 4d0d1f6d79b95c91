import numpy as np
import pytest

from graphopt.analysis import format_graph, op_counts, verify
from graphopt.ir import DType, Graph, GraphError, Op, Tensor


def chain_graph():
    graph = Graph()
    x = graph.add_input("x", DType.FLOAT32, ("batch", 8))
    relu = graph.add_node(Op.RELU, [x], name="relu")
    tanh = graph.add_node(Op.TANH, [relu.output], name="tanh")
    graph.set_outputs([tanh.output])
    return graph, x, relu, tanh


def test_values_know_producer_uses_and_symbolic_shapes():
    graph, x, relu, tanh = chain_graph()
    assert relu.output.producer is relu
    assert [u.node for u in x.uses] == [relu]
    assert [u.node for u in relu.output.uses] == [tanh]
    assert tanh.output.shape == ("batch", 8)
    assert tanh.output.dtype is DType.FLOAT32
    verify(graph)


def test_replace_all_uses_moves_readers_and_outputs():
    graph, _, relu, tanh = chain_graph()
    graph.replace_all_uses(tanh.output, relu.output)
    assert graph.outputs == [relu.output]
    assert tanh.output.uses == ()
    graph.erase(tanh)
    assert op_counts(graph) == {"relu": 1}
    verify(graph)


def test_erase_refuses_a_node_whose_output_is_read():
    graph, _, relu, _ = chain_graph()
    with pytest.raises(GraphError, match="cannot erase relu 'relu': 'relu' is read by 'tanh'"):
        graph.erase(relu)


def test_remove_dead_drops_unreachable_nodes_and_constants():
    graph, x, _, _ = chain_graph()
    graph.add_node(Op.EXP, [x], name="unused")
    graph.add_constant(Tensor.from_array(np.ones(3, np.float32)), "unused_weight")
    assert graph.remove_dead() == 1
    assert "unused_weight" not in graph.constants
    assert op_counts(graph) == {"relu": 1, "tanh": 1}


def test_sort_restores_topological_order_and_names_cycles():
    graph, x, relu, tanh = chain_graph()
    late = graph.add_node(Op.NEG, [x], name="late")
    relu.replace_input_with(0, late.output)
    graph.sort()
    assert [n.name for n in graph] == ["late", "relu", "tanh"]
    late.replace_input_with(0, tanh.output)
    with pytest.raises(GraphError, match="cycle through nodes"):
        graph.sort()


def test_inferred_shapes_of_structural_ops():
    graph = Graph()
    x = graph.add_input("x", DType.FLOAT16, (6, 4))
    parts = graph.add_node(Op.SPLIT, [x], {"axis": 0, "sizes": (2, 4)})
    assert [v.shape for v in parts.outputs] == [(2, 4), (4, 4)]
    stacked = graph.add_node(Op.STACK, [x, x], {"axis": 1}).output
    assert stacked.shape == (6, 2, 4)
    view = graph.add_node(Op.RESHAPE, [stacked], {"shape": (0, -1)}).output
    assert view.shape == (6, 8)
    concat = graph.add_node(Op.CONCAT, list(parts.outputs), {"axis": 0}).output
    assert concat.shape == (6, 4)
    product = graph.add_node(Op.MATMUL, [stacked, graph.add_input("w", DType.FLOAT16, (4, 3))]).output
    assert product.shape == (6, 2, 3)
    assert product.dtype is DType.FLOAT16


def test_verify_names_the_node_with_a_wrong_shape():
    graph, _, relu, _ = chain_graph()
    relu.output.shape = ("batch", 9)
    with pytest.raises(GraphError, match=r"verify: node 'relu' \(relu\) output 'relu' has shape"):
        verify(graph)


def test_verify_names_a_node_that_reads_a_later_value():
    graph, _, relu, tanh = chain_graph()
    relu.replace_input_with(0, tanh.output)
    with pytest.raises(GraphError, match=r"node 'relu' .* reads 'tanh', which is defined later"):
        verify(graph)


def test_fresh_names_never_collide():
    graph, *_ = chain_graph()
    names = {graph.fresh_name("relu") for _ in range(5)}
    assert len(names) == 5 and "relu" not in names


def test_printed_ir_lists_nodes_in_order():
    graph, *_ = chain_graph()
    text = format_graph(graph)
    assert "%relu = relu(%x)  : float32[batch,8]" in text
    assert text.index("relu(") < text.index("tanh(")


def test_node_inputs_are_written_only_through_the_node():
    graph, x, relu, tanh = chain_graph()
    assert relu.inputs == (x,)
    with pytest.raises(AttributeError):
        relu.inputs = (tanh.output,)
    relu.replace_input_with(0, None)
    assert relu.inputs == (None,) and x.uses == ()
    relu.replace_input_with(0, x)
    assert x.uses == ((relu, 0),)
    verify(graph)


def test_set_inputs_keeps_the_place_of_a_use_that_stays():
    graph, x, relu, _ = chain_graph()
    y = graph.add_input("y", DType.FLOAT32, ("batch", 8))
    add = graph.add_node(Op.ADD, [x, y], name="add")
    late = graph.add_node(Op.EXP, [x], name="late")
    add.set_inputs([x])
    assert add.inputs == (x,) and y.uses == ()
    assert [u.node for u in x.uses] == [relu, add, late]
    add.set_inputs([relu.output, x, x])
    assert [(u.node.name, u.index) for u in x.uses] == [("relu", 0), ("late", 0), ("add", 1), ("add", 2)]
    verify(graph)


def test_uses_are_a_snapshot_that_edits_leave_as_they_were():
    graph, x, relu, _ = chain_graph()
    other = graph.add_node(Op.EXP, [x], name="other")
    uses = x.uses
    for node, index in uses:
        node.replace_input_with(index, None)
    assert [u.node for u in uses] == [relu, other]
    assert x.uses == ()
    with pytest.raises(AttributeError):
        x.uses.append((relu, 0))
