"""What kind of state a tensor that the passes made becomes in the optimized program, and its name.

The optimized program keeps the original's kinds, so that ``module().to(device)``, ``state_dict()``
and ``torch.export.save`` treat it as they treat the original: a tensor made from parameters (per-slice
weights stacked into one, a weight transposed for a fused op) is a parameter, one made from buffers a
buffer, and any other a non-persistent buffer (a constant of the program: moved with the module, not
saved in its state dict). A tensor equal to the one parameter it was made from is that parameter.

Names derive from the originals': ``norms.0.weight`` … ``norms.15.weight`` stacked become
``norms.0_to_15.weight``; one parameter changed in layout, ``linear.weight`` → ``linear.weight_fused``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch.export.graph_signature import InputKind, InputSpec

from ..ir import Value
from ..ir.provenance import DERIVED_FROM

_PREFIX = {InputKind.PARAMETER: "p_", InputKind.BUFFER: "b_"}


@dataclass
class NewState:
    kind: InputKind  # PARAMETER or BUFFER
    target: str
    placeholder: str  # its placeholder's name (the builder sets the name FX gave it)
    tensor: torch.Tensor  # an nn.Parameter for a parameter
    persistent: bool | None  # for a buffer: whether the state dict holds it
    sources: tuple[str, ...]  # targets of the original state it was made from

    @property
    def spec(self) -> InputSpec:
        from torch.export.graph_signature import TensorArgument

        return InputSpec(self.kind, TensorArgument(name=self.placeholder), self.target, self.persistent)


class StateKinds:
    """Decides kind and name of each new tensor of one program (names stay unique within it)."""

    def __init__(self, program: torch.export.ExportedProgram, held: dict[str, Value]):
        specs = {s.arg.name: s for s in program.graph_signature.input_specs if hasattr(s.arg, "name")}
        self._origin_specs = {value: specs[name] for name, value in held.items() if name in specs}
        self._tensors = {**program.constants, **program.state_dict}
        self._taken = set(self._tensors)
        self._placeholders = {n.name for n in program.graph_module.graph.find_nodes(op="placeholder")}
        self.made: list[NewState] = []

    def existing(self, value: Value, tensor: torch.Tensor) -> str | None:
        """The placeholder of a tensor ``value`` equals and may be: the one original tensor it was made
        from, or one made before from the same originals (two passes folding the same lookup)."""
        specs = self._specs(value)
        state_kinds = (InputKind.PARAMETER, InputKind.BUFFER)
        if (
            len(specs) == 1
            and specs[0].kind in state_kinds
            and _equal(self._tensors.get(specs[0].target), tensor)
        ):
            return specs[0].arg.name
        sources = tuple(s.target for s in specs)
        for state in self.made:
            if state.sources == sources and _equal(state.tensor, tensor):
                return state.placeholder
        return None

    def new_state(self, value: Value, tensor: torch.Tensor) -> NewState:
        specs = self._specs(value)
        kinds = {s.kind for s in specs}
        sources = tuple(s.target for s in specs if s.kind in (InputKind.PARAMETER, InputKind.BUFFER))
        device = self._device(specs)
        if device is not None and tensor.device != device:
            tensor = tensor.to(device)
        if InputKind.PARAMETER in kinds and tensor.is_floating_point():
            kind, persistent = InputKind.PARAMETER, None
            grad = any(getattr(self._tensors.get(s.target), "requires_grad", False) for s in specs)
            tensor = torch.nn.Parameter(tensor, requires_grad=grad)
        elif InputKind.BUFFER in kinds:
            kind = InputKind.BUFFER
            persistent = any(s.persistent for s in specs if s.kind == InputKind.BUFFER)
        else:
            kind, persistent = InputKind.BUFFER, False
        target = self._unique(derived_name(sources) if sources else f"graphopt_{_identifier(value.name)}")
        placeholder = self._unique_placeholder(_PREFIX[kind] + _identifier(target))
        state = NewState(kind, target, placeholder, tensor, persistent, sources)
        self.made.append(state)
        return state

    def _device(self, specs: list[InputSpec]) -> torch.device | None:
        """Where a new tensor lives: with the tensors it was made from, else where all of the program's
        state lives (a program exported on a GPU keeps its folded constants there), else as made."""
        for spec in specs:
            source = self._tensors.get(spec.target)
            if isinstance(source, torch.Tensor):
                return source.device
        devices = {t.device for t in self._tensors.values() if isinstance(t, torch.Tensor)}
        return devices.pop() if len(devices) == 1 else None

    def _specs(self, value: Value) -> list[InputSpec]:
        origins = value.meta.get(DERIVED_FROM, ())
        return [self._origin_specs[o] for o in origins if o in self._origin_specs]

    def _unique(self, target: str) -> str:
        return _unique_in(target, self._taken)

    def _unique_placeholder(self, name: str) -> str:
        return _unique_in(name, self._placeholders)


def _unique_in(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``, ... whichever is not taken yet; it is taken from now on."""
    unique, count = name, 1
    while unique in taken:
        count += 1
        unique = f"{name}_{count}"
    taken.add(unique)
    return unique


def state_notes(original, optimized, made: list[NewState]) -> list[str]:
    """For the report: which parameters and buffers were merged into which, and why the optimized
    program holds a different number of parameter values than the original, where it does."""
    notes = []
    kinds = {s.target: s.kind for s in original.graph_signature.input_specs if getattr(s, "target", None)}
    for state in made:
        if not state.sources:
            continue
        kind = "parameter" if state.kind == InputKind.PARAMETER else "buffer"
        made_as = f"{kind} {state.target} ({'x'.join(map(str, state.tensor.shape)) or 'scalar'})"
        sources = ", ".join(state.sources)
        if len(state.sources) == 1:
            notes.append(f"{sources} rearranged as {made_as}")
        elif all(kinds.get(source) == state.kind for source in state.sources):
            notes.append(f"{sources} merged into {made_as}")
        else:
            notes.append(f"{made_as} computed once from {sources}")
    before, after = _parameter_values(original), _parameter_values(optimized)
    if before == after:
        return notes
    why = []
    used = {source for state in made for source in state.sources}
    gone = [n for n in original.state_dict if n not in optimized.state_dict and n not in used]
    if gone:
        why.append(f"no longer read (their values were folded into the computation): {', '.join(gone)}")
    computed = [s for s in made if s.kind == InputKind.PARAMETER]
    grown = [s.target for s in computed if _held(s, original, kinds) < s.tensor.numel()]
    if grown:
        why.append(f"computed once from parameters into more values than they hold: {', '.join(grown)}")
    # (a lookup of positions 0..T-1 in a longer table: the rows past T are never read)
    shrunk = [s.target for s in computed if s.sources and _held(s, original, kinds) > s.tensor.numel()]
    if shrunk:
        why.append(
            "computed once from parameters into fewer values than they hold (the part the program "
            f"reads): {', '.join(shrunk)}"
        )
    kept = [
        s.target for s in made if s.kind == InputKind.PARAMETER and set(s.sources) & set(optimized.state_dict)
    ]
    if kept:
        why.append(f"made from parameters the program also still reads as they are: {', '.join(kept)}")
    notes.append(
        f"the optimized program holds {after} parameter values, the original {before}: " + "; ".join(why)
    )
    return notes


def _held(state: NewState, original, kinds: dict) -> int:
    """The values of the parameters a new one was made from."""
    return sum(
        original.state_dict[s].numel()
        for s in state.sources
        if s in original.state_dict and kinds.get(s) == InputKind.PARAMETER
    )


def _equal(known, tensor: torch.Tensor) -> bool:
    if not isinstance(known, torch.Tensor) or known.dtype != tensor.dtype or known.shape != tensor.shape:
        return False
    return torch.equal(known.detach(), tensor.to(known.device))


def _parameter_values(program) -> int:
    return sum(t.numel() for t in program.parameters())


def derived_name(sources: Iterable[str]) -> str:
    """A target named after the targets it was made from: their common module path and leaf, with
    the parts that differ as a range (``norms.0_to_15.weight``) or joined (``q_k_v.weight``)."""
    parts = [s.split(".") for s in dict.fromkeys(sources)]
    if len(parts) == 1:
        return ".".join(parts[0]) + "_fused"
    head = 0
    while all(len(p) > head + 1 and p[head] == parts[0][head] for p in parts):
        head += 1
    tail = 0
    while all(len(p) - head > tail + 1 and p[-1 - tail] == parts[0][-1 - tail] for p in parts):
        tail += 1
    middles = ["_".join(p[head : len(p) - tail]) for p in parts]
    if all(m.isdigit() for m in middles):
        numbers = sorted(int(m) for m in middles)
        contiguous = numbers == list(range(numbers[0], numbers[-1] + 1))
        middle = f"{numbers[0]}_to_{numbers[-1]}" if contiguous else "_".join(map(str, numbers))
    else:
        middle = "_".join(middles) if len(middles) <= 4 else f"{middles[0]}_to_{middles[-1]}"
    return ".".join([*parts[0][:head], middle, *parts[0][len(parts[0]) - tail :]])


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_") or "constant"
