"""Modules with variable-size bags (nn.EmbeddingBag on flat ids and run-time offsets) and their inputs,
for the tests of batch_embedding_bags and of Op.JAGGED_BAG."""

import torch

from models.embeddings import jagged_dlrm_inputs, vocab_sizes

# The ONNX exporters' Loops (one iteration of 10 to 20 nodes per bag) are worth pooling at any N; torch
# runs one embedding_bag per feature, against about a dozen kernels of the pooled form.
FEATURES = {"torchscript": 3, "dynamo": 3, "torch.export": 16}
BATCH = 5


class JaggedFront(torch.nn.Module):
    """The DLRM front: N EmbeddingBags on flat ids and offsets, stacked with a dense [B, D] (or, with
    ``cat_dim``, their results concatenated along it). ``dims``/``dtypes``: per feature."""

    def __init__(
        self, n, mode="sum", last_offset=False, weighted=False, dims=None, dtypes=None, cat_dim=None
    ):
        super().__init__()
        dims, dtypes = dims or [4] * n, dtypes or [torch.float32] * n
        lasts = last_offset if isinstance(last_offset, list) else [last_offset] * n
        self.bags = torch.nn.ModuleList(
            torch.nn.EmbeddingBag(rows, d, mode=mode, include_last_offset=last, dtype=t)
            for rows, d, t, last in zip(vocab_sizes(n), dims, dtypes, lasts, strict=True)
        )
        self.weighted, self.cat_dim = weighted, cat_dim

    def forward(self, dense, *sparse):
        n = len(self.bags)
        ids, offsets = sparse[:n], sparse[n : 2 * n]
        weights = sparse[2 * n :] if self.weighted else [None] * n
        pooled = [
            bag(i, o, per_sample_weights=w).float()
            for bag, i, o, w in zip(self.bags, ids, offsets, weights, strict=True)
        ]
        if self.cat_dim is None:
            return torch.stack([dense, *pooled], dim=1)
        return torch.cat([dense, *pooled], dim=self.cat_dim)


def jagged_inputs(n, weighted=False, last_offset=False, seed=1, dense=4):
    return jagged_dlrm_inputs(n, BATCH, dense=dense, weighted=weighted, last_offset=last_offset, seed=seed)


def weird_offsets(count, last_offset):
    """Offsets outside torch's contract, as ONNX Runtime reads them in the exporters' Loops: a start
    past the end, a negative one (from the end), decreasing ones (overlapping bags), a short last."""
    starts = [0, count + 3, 2, -3, 1]
    return torch.tensor(starts + [count - 2] if last_offset else starts)
