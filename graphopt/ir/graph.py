"""Graph, Node, Value: the one IR both frontends load into and every pass works on.

A node owns its outputs; a value knows its producer, its ordered uses, its dtype and its shape
(dims are ints, symbolic names such as "batch", or None when unknown). Only a node's own methods
write its inputs (a tuple), and a value hands out its uses as a snapshot: use lists stay right.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from .core_types import GraphError, Shape
from .dtypes import DType
from .infer import infer_outputs
from .tensor import Tensor


class Use(NamedTuple):
    node: Node
    index: int


class Value:
    __slots__ = ("_uses", "const", "dtype", "index", "meta", "name", "producer", "shape")

    def __init__(self, name: str, dtype: DType | None, shape: Shape | None, producer=None, index=0):
        self.name = name
        self.dtype = dtype
        self.shape = None if shape is None else tuple(shape)
        self.producer: Node | None = producer
        self.index = index
        self._uses: dict[Use, None] = {}  # (a dict: in the order readers came, each found at once)
        self.const: Tensor | None = None  # set for graph constants (initializers, frozen weights)
        self.meta: dict[str, Any] = {}

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape when every dim is a known integer."""
        known = self.shape is not None and all(isinstance(d, int) for d in self.shape)
        return self.shape if known else None  # type: ignore[return-value]

    @property
    def uses(self) -> tuple[Use, ...]:
        """Who reads this value, in the order they came: a snapshot, unchanged by later edits."""
        return tuple(self._uses)

    def users(self) -> list[Node]:
        """Distinct consuming nodes, in use order."""
        return list(dict.fromkeys(use.node for use in self._uses))

    @property
    def type_text(self) -> str:
        """``float32[batch,8]``: the dtype and each dim, ``?`` where unknown."""
        dims = "?" if self.shape is None else ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]"

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type_text}"


class Node:
    __slots__ = ("_inputs", "attrs", "graph", "meta", "name", "op", "outputs", "seq", "source")

    def __init__(self, op: str, inputs: Sequence[Value | None], attrs: dict[str, Any], name: str):
        self.op = op
        self._inputs: tuple[Value | None, ...] = tuple(inputs)
        self.attrs = dict(attrs)
        self.name = name
        self.outputs: list[Value] = []
        self.meta: dict[str, Any] = {}
        # The frontend's own record of this node (an onnx NodeProto, an FX call), so that a backend
        # can write a node no pass has touched exactly as it came in.
        self.source: Any = None
        self.graph: Graph | None = None
        self.seq = 0  # creation order within the graph, for deterministic iteration

    @property
    def inputs(self) -> tuple[Value | None, ...]:
        return self._inputs

    def input(self, i: int) -> Value | None:
        """Input i, or None when it is absent (an omitted optional input)."""
        return self._inputs[i] if i < len(self._inputs) else None

    def replace_input_with(self, index: int, value: Value | None) -> None:
        """Reads ``value`` (None: nothing) as input ``index``; both values' use lists follow."""
        old = self._inputs[index]
        if old is not None:
            del old._uses[(self, index)]  # (equal to the Use: no NamedTuple built to find it)
        self._inputs = (*self._inputs[:index], value, *self._inputs[index + 1 :])
        if value is not None:
            value._uses[Use(self, index)] = None
            if self.graph is not None:  # (reading a value produced later breaks the order)
                self.graph._ordered = False

    def set_inputs(self, values: Sequence[Value | None]) -> None:
        """Reads ``values`` instead; an input that stays keeps its place in its value's use list."""
        for index in range(len(self._inputs) - 1, len(values) - 1, -1):
            self.replace_input_with(index, None)
        self._inputs = self._inputs[: len(values)] + (None,) * (len(values) - len(self._inputs))
        for index, value in enumerate(values):
            if self._inputs[index] is not value:
                self.replace_input_with(index, value)

    @property
    def output(self) -> Value:
        return self.outputs[0]

    def __repr__(self) -> str:
        return f"<{self.op} {self.name!r}>"


class Graph:
    def __init__(self, name: str = "main"):
        self.name = name
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.constants: dict[str, Value] = {}
        self.meta: dict[str, Any] = {}
        self._nodes: dict[Node, None] = {}
        self._by_op: defaultdict[str, dict[Node, None]] = defaultdict(dict)
        self._names: set[str] = set()  # names of values that exist, or did
        self._reserved: set[str] = set()  # handed out by fresh_name(), not yet carried by a value
        self._output_count: defaultdict[Value, int] = defaultdict(int)
        self._counter = itertools.count()
        self._ordered = True  # False once an edit may have put a reader before its producer

    # ----- reading -------------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(list(self._nodes))

    def __contains__(self, node: Node) -> bool:
        return node in self._nodes

    def nodes_of(self, ops: str | Iterable[str]) -> list[Node]:
        """The nodes whose op is one of ``ops``, in the order they were created."""
        ops = {ops} if isinstance(ops, str) else set(ops)
        found = [n for op in ops for n in self._by_op.get(op, ())]
        if len(ops) > 1:
            found.sort(key=lambda n: n.seq)
        return found

    def count_of(self, ops: Iterable[str]) -> int:
        """How many nodes have one of ``ops``."""
        return sum(len(self._by_op.get(op, ())) for op in ops)

    def is_output(self, value: Value) -> bool:
        return self._output_count.get(value, 0) > 0

    def is_used(self, value: Value) -> bool:
        return bool(value._uses) or self.is_output(value)

    def owns(self, value: Value) -> bool:
        """Whether ``value`` is one of this graph's: an input, a constant, or a node's output."""
        if value.producer is not None:
            return value.producer.graph is self
        if value.const is not None:
            return self.constants.get(value.name) is value
        return any(value is v for v in self.inputs)

    def values(self) -> Iterator[Value]:
        yield from self.inputs
        yield from self.constants.values()
        for node in self._nodes:
            yield from node.outputs

    # ----- names ---------------------------------------------------------------------------------
    def reserve_name(self, name: str) -> None:
        """Keeps ``name`` from fresh_name(): for names used inside subgraphs."""
        self._names.add(name)

    def fresh_name(self, hint: str) -> str:
        """A value name no value of this graph (or of its subgraphs) uses yet."""
        hint = hint or "v"
        name = hint
        while name in self._names or name in self._reserved:
            name = f"{hint}_{next(self._counter)}"
        self._reserved.add(name)
        return name

    def swap_names(self, a: Value, b: Value) -> None:
        a.name, b.name = b.name, a.name

    # ----- building ------------------------------------------------------------------------------
    def add_input(self, name: str, dtype: DType | None, shape: Shape | None) -> Value:
        self._claim(name)
        value = Value(name, dtype, shape)
        self.inputs.append(value)
        return value

    def add_constant(self, tensor: Tensor, name: str) -> Value:
        """A graph-level constant (an initializer); ``name`` is a hint when taken."""
        value = Value(self.fresh_name(name), tensor.dtype, tensor.shape)
        self._claim(value.name)
        value.const = tensor
        self.constants[value.name] = value
        return value

    def add_node(
        self,
        op: str,
        inputs: Sequence[Value | None],
        attrs: dict[str, Any] | None = None,
        *,
        outputs: Sequence[tuple[str, DType | None, Shape | None]] | int | None = None,
        name: str | None = None,
    ) -> Node:
        """Appends a node. ``outputs``: (name, dtype, shape) per output, or a count / None to infer."""
        for value in inputs:
            if value is not None and not self.owns(value):
                raise GraphError(f"node {name or op!r}: input {value.name!r} is not a value of this graph")
        node = Node(op, inputs, attrs or {}, name or f"{op}_{next(self._counter)}")
        node.seq = next(self._counter)
        if outputs is None or isinstance(outputs, int):
            inferred = infer_outputs(node)
            if isinstance(outputs, int) and len(inferred) != outputs:
                raise GraphError(f"{node.op} infers {len(inferred)} outputs, {outputs} requested")
            outputs = [(self.fresh_name(node.name), dtype, shape) for dtype, shape in inferred]
        for index, (out_name, dtype, shape) in enumerate(outputs):
            self._claim(out_name)
            node.outputs.append(Value(out_name, dtype, shape, producer=node, index=index))
        for index, value in enumerate(node._inputs):
            if value is not None:
                value._uses[Use(node, index)] = None
        node.graph = self
        # Appended after every value it reads (they all exist already): a topological order stays one.
        self._nodes[node] = None
        self._by_op[op][node] = None
        return node

    def set_outputs(self, values: Sequence[Value]) -> None:
        self._output_count.clear()
        self.outputs = list(values)
        for value in values:
            self._output_count[value] += 1

    # ----- editing -------------------------------------------------------------------------------
    def replace_all_uses(self, old: Value, new: Value, *, new_is_earlier: bool = False) -> None:
        """Every node input and graph output reading ``old`` reads ``new`` instead. ``new_is_earlier``:
        the caller knows ``new`` is produced before ``old`` in the current order, which therefore
        stays topological (no re-sort needed)."""
        if old is new:
            return
        for use in old._uses:  # (each Use moves as it is)
            node, index = use
            node._inputs = (*node._inputs[:index], new, *node._inputs[index + 1 :])
            new._uses[use] = None
        old._uses = {}
        if not new_is_earlier:
            self._ordered = False
        if self.is_output(old):
            self.outputs = [new if v is old else v for v in self.outputs]
            self._output_count[new] += self._output_count.pop(old)

    def erase(self, node: Node) -> None:
        """Removes a node whose outputs nobody reads."""
        for value in node.outputs:
            if self.is_used(value):
                readers = ", ".join(repr(u.node.name) for u in value.uses) or "the graph outputs"
                raise GraphError(f"cannot erase {node.op} {node.name!r}: {value.name!r} is read by {readers}")
        for index, value in enumerate(node._inputs):  # (its inputs stay, for revive)
            if value is not None:
                del value._uses[(node, index)]
        del self._nodes[node]
        del self._by_op[node.op][node]
        node.graph = None
        # Nobody reads these outputs any more: unlinked from their producer, the node and its values
        # are freed by reference counting rather than left for the cycle collector.
        for value in node.outputs:
            value.producer = None

    def revive(self, node: Node, reads: dict[Value, Value] | None = None) -> None:
        """Puts back a node that ``erase`` removed, with its outputs and their names, reading
        ``reads[v]`` in place of each input v found there (a value merged or replaced since)."""
        if node.graph is not None:
            raise GraphError(f"cannot revive {node.op} {node.name!r}: it is in a graph")
        reads = reads or {}
        inputs = tuple(None if v is None else reads.get(v, v) for v in node._inputs)
        for value in inputs:
            if value is not None and not self.owns(value):
                raise GraphError(f"cannot revive {node.name!r}: {value.name!r} is not a value of this graph")
        node._inputs = inputs
        for index, value in enumerate(inputs):
            if value is not None:
                value._uses[Use(node, index)] = None
        for value in node.outputs:
            value.producer = node
        node.graph = self
        self._nodes[node] = None
        self._by_op[node.op][node] = None
        self._ordered = False

    def revive_constant(self, value: Value) -> None:
        """Puts back a graph constant that dead-value removal dropped."""
        if value.const is None or self.constants.get(value.name, value) is not value:
            raise GraphError(f"cannot revive constant {value.name!r}")
        self.constants[value.name] = value

    def release(self) -> None:
        """Empties the graph and unlinks its nodes and values from one another, for a graph that is no
        longer needed: nodes and values reference each other, so without this only Python's cycle
        collector could free them, walking every one of them (half a second at 50,000 nodes)."""
        for node in self._nodes:
            # (a node that references no value and no graph closes no cycle: none leads back to it)
            node._inputs = ()
            node.outputs = []
            node.graph = None
        self._nodes.clear()
        self._by_op.clear()
        self._output_count.clear()
        self.inputs, self.outputs, self.constants = [], [], {}
        self.meta = {}

    def remove_dead(self, keep_constants: bool = False) -> int:
        """Erases nodes (and, unless ``keep_constants``, constants) that no output depends on."""
        removed = 0
        for node in reversed(list(self._nodes)):
            if not any(self.is_used(v) for v in node.outputs) and not node.meta.get("side_effects"):
                self.erase(node)
                removed += 1
        if not keep_constants:
            for name, value in list(self.constants.items()):
                if not self.is_used(value):
                    del self.constants[name]
        return removed

    def sort(self) -> None:
        """Orders nodes topologically, keeping the current order wherever it is already valid."""
        if self._ordered:
            return
        order: dict[Node, None] = {}
        on_path: set[Node] = set()
        for root in self._nodes:
            if root in order:
                continue
            for value in root._inputs:
                if value is not None and value.producer is not None and value.producer not in order:
                    break
            else:  # every input is placed already (most nodes): what the walk below does, without it
                order[root] = None
                continue
            stack: list[tuple[Node, Iterator[Value | None]]] = [(root, iter(root._inputs))]
            on_path.add(root)
            while stack:
                node, pending = stack[-1]
                for value in pending:
                    producer = value.producer if value is not None else None
                    if producer is None or producer in order:
                        continue
                    if producer in on_path:
                        cycle = [n.name for n, _ in stack[[n for n, _ in stack].index(producer) :]]
                        raise GraphError(f"the graph has a cycle through nodes {' -> '.join(cycle)}")
                    stack.append((producer, iter(producer._inputs)))
                    on_path.add(producer)
                    break
                else:
                    stack.pop()
                    on_path.discard(node)
                    order[node] = None
        self._nodes = order
        self._ordered = True

    # ----- helpers -------------------------------------------------------------------------------
    def _claim(self, name: str) -> None:
        if name in self._reserved:
            self._reserved.discard(name)
        elif name in self._names:
            raise GraphError(f"value name {name!r} is defined twice")
        self._names.add(name)


def constant_of(value: Value) -> Tensor | None:
    """The tensor of a constant value: a graph constant or the output of a constant node."""
    if value.const is not None:
        return value.const
    producer = value.producer
    if producer is not None and producer.op == "constant":
        return producer.attrs["value"]
    return None
