"""The fused ops as PyTorch operators in namespace ``graphopt`` (``torch.ops.graphopt.*``).

Every torch form of every fused op (``FusedOp.torch_forms``) becomes one op, its schema derived
from the spec, its body, fake implementation and autograd formula taken from the op's
``torch_impl.IMPLS``. Each op is a ``torch.library.triton_op`` whose body launches the op's Triton
kernel on CUDA, wrapped with ``torch.library.wrap_triton`` so that torch.compile sees the kernel,
and runs plain-PyTorch math on every other device. The explicit fake implementation is needed
under ``TRITON_INTERPRET=1``, and cheaper than tracing the body. torch.export keeps each op as one
node.

Eager calls skip the layers of Python that ``triton_op`` puts around its body (they exist for
tracing): the same body is registered directly as the CPU kernel, and as the CUDA kernel behind a
launch plan per call signature (``torch_launch_plans``: later calls launch the compiled kernels
directly, not through Triton's JIT dispatch); and an eager call runs from the autograd key, past
custom_op's autograd layer (``torch_direct``). That saves tens of microseconds per call, which
matters for small launches. Where an op has a C++ fast path (``torch_native``), its eager CUDA
calls skip Python altogether from the first such call on.

Importing this module registers the ops, once; it imports no Triton kernel until a CUDA tensor
arrives, so it works on machines without a GPU, and without Triton.
"""

import contextlib
import importlib
import importlib.util
import inspect
from collections.abc import Callable

import torch
from torch import Tensor

from graphopt.fused import torch_direct, torch_native, torch_triton
from graphopt.fused.registry import FUSED_OPS
from graphopt.fused.spec import DOMAIN, FusedOp, TorchForm
from graphopt.fused.torch_launch_plans import PlannedLaunches

NAMESPACE = DOMAIN

# triton_op searches each body for Triton kernels as it registers the op, and logs a warning per op
# where Triton is not installed (a CPU-only install, where no kernel can launch anyway): there the
# same bodies become plain custom ops.
_op = torch.library.triton_op if importlib.util.find_spec("triton") is not None else torch.library.custom_op

# Direct eager kernels (see the module's docstring); the object must live as long as the ops.
_EAGER = torch.library.Library(NAMESPACE, "IMPL")
# Each op form's eager CUDA kernel, by name: its launch plans.
PLANNED: dict[str, PlannedLaunches] = {}
# Each op form's registration of its Python kernels for the CUDA keys, by name (torch_native).
CUDA_KERNELS: dict[str, Callable[[torch.library.Library], None]] = {}


@contextlib.contextmanager
def _no_kernel_scan():
    """Defines triton ops without torch's scan of their bodies for Triton kernels (torch 2.13 and
    later scan at definition, for ahead-of-time packaging): the scan imports Inductor and Dynamo,
    1.5 s, which ``import graphopt`` must not cost, and it finds nothing here anyway, the kernels
    being imported only when a CUDA tensor arrives."""
    from torch._library import triton as library_triton

    scan = getattr(library_triton, "get_inner_triton_kernels", None)
    if scan is None:
        yield
        return
    library_triton.get_inner_triton_kernels = lambda fn: []
    try:
        yield
    finally:
        library_triton.get_inner_triton_kernels = scan


def signature(op: FusedOp, form: TorchForm) -> inspect.Signature:
    """The torch op's Python signature, from which torch.library infers its schema: the form's
    inputs (``Tensor | None`` where the port is optional), then the attributes."""
    parameters = []
    for name in form.inputs:
        port = op.inputs[op.port_index(name)]
        optional = port.optional and name not in form.required
        parameters.append(_parameter(port.torch_name, Tensor | None if optional else Tensor))
    parameters += [_parameter(a.ir_name, a.value_type) for a in op.attributes]
    result = Tensor if len(form.outputs) == 1 else tuple[(Tensor,) * len(form.outputs)]
    return inspect.Signature(parameters, return_annotation=result)


def _parameter(name: str, annotation) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation)


def _register_eager(defined, name: str, impl) -> None:
    """Registers the op's eager kernels: on CUDA its launches from a plan per call signature
    (``torch_launch_plans``), elsewhere its body (the plain-torch math); and the path past the autograd
    layer (``torch_direct``). The first eager CUDA call puts the C++ kernels in front where they
    build (``torch_native``)."""

    def cpu_kernel(*args, _body=impl.body):
        return _body(*args, wrap=torch_triton.eager_launch)

    cuda_kernel = PLANNED[name] = PlannedLaunches(impl.body, torch_triton.eager_launch, _activate_native)

    def register_cuda(library: torch.library.Library) -> None:
        library.impl(name, cuda_kernel, "CUDA")
        torch_direct.register(library, defined, {"CUDA": cuda_kernel}, impl.math, impl.backward is not None)

    CUDA_KERNELS[name] = register_cuda
    register_cuda(_EAGER)
    _EAGER.impl(name, cpu_kernel, "CPU")
    torch_direct.register(_EAGER, defined, {"CPU": cpu_kernel}, impl.math, impl.backward is not None)


def _activate_native() -> None:
    torch_native.activate(CUDA_KERNELS)


def _register(op: FusedOp) -> None:
    impls = importlib.import_module(f"{op.package}.torch_impl").IMPLS
    for form in op.torch_forms:
        impl = impls[form.name]

        def traced(*args, _body=impl.body):
            return _body(*args, wrap=torch.library.wrap_triton)

        traced.__signature__ = signature(op, form)
        with _no_kernel_scan():
            defined = _op(f"{NAMESPACE}::{form.name}", traced, mutates_args=())
        _register_eager(defined, form.name, impl)
        defined.register_fake(impl.fake)
        if impl.backward is not None:
            defined.register_autograd(impl.backward, setup_context=impl.setup_context)


for _fused_op in FUSED_OPS:
    _register(_fused_op)
