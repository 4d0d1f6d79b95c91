"""Eager CUDA calls of every fused op launched from a plan kept per call signature.

An op's body (``torch_impl``) reshapes its arguments into the views its Triton launcher takes, picks a
launch tier, computes the grid and the kernel's scalar arguments, then launches. All of that follows
from the arguments' signature alone: their shapes, strides, dtypes, devices and pointer alignment (what
Triton specializes on), and the op's attributes. So the first call of a signature runs the body once,
with a ``wrap`` that records each launch (kernel, grid, arguments, the compiled kernel Triton returns),
and keeps a plan: the outputs to allocate, and per launch the compiled kernel with its arguments,
where each tensor argument is named by the call's input or output whose memory it starts at. A later
call of that signature allocates the outputs and launches the compiled kernels directly: no reshapes,
no tier search, no per-argument specialization key.

A body that needs memory of its own for its launches (partial results one kernel writes and the next
reads) asks for it with ``torch_triton.scratch``: the recording wrap notes each such tensor, and the
plan allocates it afresh on every call, as it allocates the outputs. A signature gets no plan where
the body made any other tensor of its own for a launch (a contiguous copy of an input, say: a plan
cannot tell what it holds), where one pointer could be either of two inputs, or where an output is not
a whole, contiguous allocation: those calls keep running the body.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from graphopt.fused import torch_triton
from graphopt.fused.torch_launch import LaunchVariant

# (torch.cuda.current_device checks lazy initialization on every call; calls with CUDA tensors run on
# an initialized device)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device

MAX_PLANS = 4096  # signatures kept per op; a program whose shapes keep changing starts over past this
_ALIGN = 16
_NO_PLAN = object()
# Where a launch's tensor argument comes from on each call: the call's inputs, its outputs, or the
# scratch tensors the plan allocates.
_INPUT, _OUTPUT, _SCRATCH = 0, 1, 2


def _signature(args: tuple) -> tuple:
    """What a plan depends on: per tensor its layout and whether its address is aligned, per other
    argument its value (one comprehension: this runs on every call)."""
    return tuple([
        (a.shape, a.stride(), a.dtype, a.device, not a.data_ptr() % _ALIGN) if isinstance(a, torch.Tensor)
        else a
        for a in args
    ])  # fmt: skip


class PlannedLaunches:
    """The eager CUDA kernel of one op form: ``body(*args, wrap=...)`` is its general path, ``wrap``
    the eager launcher wrap the general path uses."""

    def __init__(self, body: Callable, wrap: Callable, on_new_signature: Callable[[], object] | None = None):
        self.body, self.wrap = body, wrap
        self.on_new_signature = on_new_signature  # (called before a new signature's first call)
        self.plans: dict[tuple, object] = {}

    def __call__(self, *args):
        if not torch_triton.CACHED_LAUNCH:
            return self.body(*args, wrap=self.wrap)
        key = (_current_device(), _signature(args))
        plan = self.plans.get(key)
        if plan is None:
            return self._first_call(key, args)
        if plan is _NO_PLAN:
            return self.body(*args, wrap=self.wrap)
        return plan(args)

    def _first_call(self, key: tuple, args: tuple):
        if self.on_new_signature is not None:
            self.on_new_signature()
        recorder = _Recorder()
        result = self.body(*args, wrap=recorder)
        if len(self.plans) >= MAX_PLANS:
            self.plans.clear()
        self.plans[key] = _Plan.make(args, result, recorder) or _NO_PLAN
        return result

    def clear(self) -> None:
        self.plans.clear()

    def kept(self) -> list[_Plan]:
        """The plans that launch directly (not the signatures left to the general path)."""
        return [plan for plan in self.plans.values() if plan is not _NO_PLAN]


class _Recorded:
    def __init__(self, kernel, grid, args, kwargs, compiled):
        self.kernel, self.grid, self.args, self.kwargs, self.compiled = kernel, grid, args, kwargs, compiled


class _Recorder:
    """The ``wrap`` of a planning call: each kernel it wraps records its launches here, and the scratch
    tensors the body asks for (``torch_triton.scratch``) are noted here."""

    def __init__(self):
        self.launches: list[_Recorded] = []
        self.scratches: list[torch.Tensor] = []

    def __call__(self, kernel):
        return _Recording(kernel, self.launches)

    def scratch(self, numel: int, dtype: torch.dtype, device) -> torch.Tensor:
        tensor = torch.empty(numel, dtype=dtype, device=device)
        self.scratches.append(tensor)
        return tensor


class _Recording:
    """Stands in for a kernel in the planning call: launches it through Triton's JIT (compiling it if
    needed) and records the launch."""

    def __init__(self, kernel, launches: list[_Recorded]):
        self.kernel, self.launches = kernel, launches

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            compiled = self.kernel[grid](*args, **kwargs)
            self.launches.append(_Recorded(self.kernel, tuple(grid), args, kwargs, compiled))
            return compiled

        return run


class _Plan:
    """The outputs' and scratch tensors' layouts, and per launch its compiled kernel and argument list
    with slots."""

    steps: list[_Step]

    @classmethod
    def make(cls, args: tuple, result, recorder: _Recorder) -> _Plan | None:
        outputs = result if isinstance(result, tuple) else (result,)
        tensors = [(a.data_ptr(), i) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        made = []
        for out in outputs:
            if out is None:
                made.append(None)
                continue
            whole = out.is_contiguous() and out.untyped_storage().nbytes() == out.numel() * out.element_size()
            if not whole or out.storage_offset():
                return None
            made.append((tuple(out.shape), out.dtype, out.device, out.data_ptr()))
        owners: dict[int, list[tuple[int, int]]] = {}
        for pointer, index in tensors:
            owners.setdefault(pointer, []).append((_INPUT, index))
        for index, out in enumerate(made):
            if out is not None:
                owners.setdefault(out[3], []).append((_OUTPUT, index))
        for index, t in enumerate(recorder.scratches):
            owners.setdefault(t.data_ptr(), []).append((_SCRATCH, index))
        steps = []
        for launch in recorder.launches:
            if launch.compiled is None:
                return None  # (Triton's interpreter compiles nothing to keep)
            slots, template = [], list(launch.args)
            for position, arg in enumerate(launch.args):
                if isinstance(arg, torch.Tensor):
                    owner = owners.get(arg.data_ptr(), [])
                    if len(owner) != 1:
                        return None  # a tensor of the body's own, or a pointer two inputs share
                    slots.append((position, *owner[0]))
                    template[position] = None
            steps.append(_Step(launch, template, slots))
        scratches = [(t.numel(), t.dtype, t.device) for t in recorder.scratches]
        return cls([None if m is None else m[:3] for m in made], scratches, isinstance(result, tuple), steps)

    def __init__(self, outputs: list, scratches: list, as_tuple: bool, steps: list[_Step]):
        self.outputs, self.scratches, self.as_tuple, self.steps = outputs, scratches, as_tuple, steps

    def __call__(self, args: tuple):
        outputs = [None if o is None else torch.empty(o[0], dtype=o[1], device=o[2]) for o in self.outputs]
        # (freed when the call returns: the caching allocator hands the memory out again only to work
        # queued after these launches on the same stream)
        scratches = [torch.empty(n, dtype=dtype, device=device) for n, dtype, device in self.scratches]
        sources = (args, outputs, scratches)  # indexed by _INPUT, _OUTPUT, _SCRATCH
        for step in self.steps:
            step.launch(sources)
        return tuple(outputs) if self.as_tuple else outputs[0]


class _Step:
    """One launch of a plan: the compiled kernel, its argument list with the tensors left as slots."""

    def __init__(self, launch: _Recorded, template: list, slots: list[tuple[int, int, int]]):
        names = list(launch.kernel.arg_names)
        constexprs = sorted((names.index(k), k) for k in launch.kwargs if k in names)
        self.variant = LaunchVariant(launch.compiled, constexprs)
        self.grid, self.kwargs = launch.grid, launch.kwargs
        self.template, self.slots = template, slots

    def launch(self, sources: tuple) -> None:
        full = list(self.template)
        for position, kind, index in self.slots:
            full[position] = sources[kind][index]
        self.variant.launch(self.grid, full, self.kwargs)
