"""NumPy ⇄ torch for constant tensors, bfloat16 included (NumPy spells it through ml_dtypes)."""

from __future__ import annotations

import numpy as np
import torch

from ..ir import DType


def to_torch(array: np.ndarray) -> torch.Tensor:
    """A torch tensor owning a copy of ``array``. An empty one is torch's own empty tensor: one made from
    NumPy's memory keeps a non-null address with no bytes, which ``torch.export.save`` cannot write (it
    groups tensors by address and computes a negative size)."""
    array = np.asarray(array, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if array.dtype == DType.BFLOAT16.numpy:
        tensor = torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    else:
        tensor = torch.from_numpy(array.copy())
    return tensor if tensor.numel() else torch.empty(tensor.shape, dtype=tensor.dtype)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(DType.BFLOAT16.numpy)
    return tensor.numpy()
