"""What the torch.export frontend records on IR nodes so the backend can re-emit FX calls exactly.

Usually one FX call becomes one IR node. A few calls become several IR nodes (``addmm`` is a matmul
and an add, ``unbind`` a split and a squeeze per piece), and getitem nodes fold into the outputs of a
multi-output node. An ``FxGroup`` ties such IR nodes (its members) to the FX calls they came from.
Its arguments are templates: ``Ref(member, input)`` where an argument reads an IR node's input,
``Attr`` where it reads a ``get_attr`` node (a higher-order op's subgraph module).

While no pass has changed a group's inside, the backend writes its calls back as they were: same
target, arguments, name and meta. Once a pass has rewired or removed part of it, each remaining member
is written from its canonical form instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir import Graph, Node, Value


@dataclass(frozen=True)
class Ref:
    """An argument that reads input ``input`` of the group's member ``member``."""

    member: int
    input: int


@dataclass(frozen=True)
class Attr:
    """An argument that reads a ``get_attr`` node (a subgraph module of the program)."""

    target: str
    name: str


@dataclass
class FxCall:
    target: Any
    args: tuple
    kwargs: dict
    name: str
    meta: dict
    # getitem index -> (name, meta) of the FX getitem node that read that element of the result
    items: dict[int, tuple[str, dict]] = field(default_factory=dict)


@dataclass(eq=False)
class FxGroup:
    """FX calls and the IR nodes (``members``) they became.

    ``produced[m][o]`` says which call result gives member m's output o: ``(call, item)`` with item
    None for the call's own value, or None for an output the group itself consumes (``internal``).
    ``internal`` lists (consumer member, input index, producer member, output index).
    ``fixed[m]`` holds member m's inputs that the calls do not read (a scalar's IR constant): a pass
    that rewires one of them has changed what the node computes.
    """

    calls: list[FxCall]
    members: list[Node] = field(default_factory=list)
    produced: list[list[tuple[int, int | None] | None]] = field(default_factory=list)
    internal: list[tuple[int, int, int, int]] = field(default_factory=list)
    fixed: list[dict[int, Value]] = field(default_factory=list)

    def intact(self, graph: Graph) -> bool:
        """Whether the members still compute exactly what the calls do."""
        if any(member.graph is not graph for member in self.members):
            return False
        for consumer, index, producer, output in self.internal:
            if self.members[consumer].input(index) is not self.members[producer].outputs[output]:
                return False
        internal_reads: dict[Value, int] = {}
        for _, _, producer, output in self.internal:
            value = self.members[producer].outputs[output]
            internal_reads[value] = internal_reads.get(value, 0) + 1
        for m, member in enumerate(self.members):
            if any(member.input(i) is not v for i, v in self.fixed[m].items()):
                return False
            for o, value in enumerate(member.outputs):
                if self.produced[m][o] is None and (
                    graph.is_output(value) or len(value.uses) != internal_reads.get(value, 0)
                ):
                    return False
        return True

    def external_refs(self) -> list[Ref]:
        """Every Ref the calls' arguments hold."""
        from torch.fx.node import map_aggregate

        found: list[Ref] = []

        def visit(a):
            if isinstance(a, Ref):
                found.append(a)
            return a

        for call in self.calls:
            map_aggregate((call.args, call.kwargs), visit)
        return found


@dataclass(frozen=True)
class PlaceholderSource:
    """An IR node standing for a placeholder that is neither a tensor constant nor a user input
    (a custom object, an effect token): the backend reads the placeholder itself."""

    name: str
