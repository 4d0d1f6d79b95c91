"""EmbeddingLookups' torch op ``embedding_lookups``: the Triton kernel on CUDA
(``triton_kernel.launch_embedding_lookups``), torch's own embedding lookup elsewhere (``torch_math``).
``wrap`` is ``torch.library.wrap_triton`` when traced."""

from __future__ import annotations

import torch
from torch import Tensor

from graphopt.fused.embedding_lookups import torch_math
from graphopt.fused.torch_impl import TorchImpl
from graphopt.fused.torch_triton import launcher, no_wrap

_KERNEL = f"{__package__}.triton_kernel"
_INDEX_TYPES = (torch.int32, torch.int64)


def check_arguments(table: Tensor, indices: Tensor, offsets: Tensor, sizes: Tensor) -> None:
    """Raises on what the kernels would reject, so tracing fails where eager would."""
    torch._check(table.dim() == 2, lambda: f"table must be [rows, dim], got {list(table.shape)}")
    torch._check(indices.dim() >= 1, lambda: "indices must have a feature dim first, got a scalar")
    torch._check(
        indices.dtype in _INDEX_TYPES, lambda: f"indices must be int32 or int64, got {indices.dtype}"
    )
    for name, t in (("indices", indices), ("offsets", offsets), ("sizes", sizes)):
        torch._check(
            t.device == table.device,
            lambda name=name, t=t: f"{name} must be on the table's device {table.device}, got {t.device}",
        )
    features = indices.shape[0]
    for name, t in (("offsets", offsets), ("sizes", sizes)):
        torch._check(t.dtype == torch.int64, lambda name=name, t=t: f"{name} must be int64, got {t.dtype}")
        torch._check(
            t.dim() == 1 and t.shape[0] == features,
            lambda name=name, t=t: f"{name} must be [{features}] (one per feature), got {list(t.shape)}",
        )


def launch(table, indices, offsets, sizes, wrap_negative: int, wrap=no_wrap) -> Tensor:
    """The Triton launch: one program per block of indices, each copying its rows. An index out of
    range stops the kernel with a device-side trap, as torch's own lookup stops with a device-side
    assert."""
    width = table.shape[1]
    y = table.new_empty((*indices.shape, width))
    if y.numel() == 0:
        return y
    table = table if table.is_contiguous() else table.contiguous()
    flat = indices.reshape(-1)
    flat = flat if flat.is_contiguous() else flat.contiguous()
    launcher(_KERNEL, "launch_embedding_lookups")(
        table, flat, offsets.contiguous(), sizes.contiguous(), y.view(-1, width),
        per_feature=flat.shape[0] // indices.shape[0], wrap_negative=wrap_negative, trap=True, wrap=wrap,
    )  # fmt: skip
    return y


def _embedding_lookups(table, indices, offsets, sizes, wrap_negative, wrap):
    if table.is_cuda:
        check_arguments(table, indices, offsets, sizes)
        return launch(table, indices, offsets, sizes, wrap_negative, wrap)
    return _embedding_lookups_math(table, indices, offsets, sizes, wrap_negative)


def _embedding_lookups_math(table, indices, offsets, sizes, wrap_negative):
    check_arguments(table, indices, offsets, sizes)
    return torch_math.embedding_lookups(table, indices, offsets, sizes, wrap_negative)


def _embedding_lookups_fake(table, indices, offsets, sizes, wrap_negative):
    check_arguments(table, indices, offsets, sizes)
    return table.new_empty((*indices.shape, table.shape[1]))


def _setup_context(ctx, inputs, output):
    table, indices, offsets, sizes, wrap_negative = inputs
    ctx.save_for_backward(torch_math.source_rows(table, indices, offsets, sizes, wrap_negative))
    ctx.table_rows = table.shape[0]


def _backward(ctx, grad):
    (rows,) = ctx.saved_tensors
    return torch_math.table_grad(grad, rows, ctx.table_rows), None, None, None, None


IMPLS = {
    "embedding_lookups": TorchImpl(
        _embedding_lookups,
        _embedding_lookups_fake,
        _backward,
        _setup_context,
        math=_embedding_lookups_math,
    )
}
