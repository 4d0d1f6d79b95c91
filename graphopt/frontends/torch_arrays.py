"""NumPy ⇄ torch for constant tensors, bfloat16 included (NumPy spells it through ml_dtypes)."""

from __future__ import annotations

import numpy as np
import torch

from ..ir import DType


def to_torch(array: np.ndarray) -> torch.Tensor:
    """A torch tensor owning a copy of ``array``."""
    array = np.asarray(array, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if array.dtype == DType.BFLOAT16.numpy:
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(DType.BFLOAT16.numpy)
    return tensor.numpy()
