"""Tiny `nn.Module`s for the test zoo: each one shows an op pattern that exporters emit in real models."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class ConvBN(nn.Module):
    """Conv → BatchNorm → ReLU, then Conv → ReLU → BatchNorm, pooled and projected; exported in eval mode.

    Exporters fold a BatchNorm that directly follows a Conv; the second one, after the ReLU, cannot be folded
    and stays a BatchNormalization node.
    """

    def __init__(self, channels: int = 3, width: int = 8, classes: int = 4):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.head = nn.Linear(width, classes)
        # Running statistics away from (0, 1), so a folded or dropped BatchNorm shows in the outputs.
        for bn in (self.bn1, self.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            nn.init.uniform_(bn.weight, 0.5, 1.5)
            nn.init.uniform_(bn.bias, -0.2, 0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.bn2(F.relu(self.conv2(x)))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class DenseLayers(nn.Module):
    """DenseNet's pre-activation layers: concat → BatchNorm → ReLU → Conv, each layer's output concatenated
    to its input. No conv precedes these batch norms, so none is folded; ONNX Runtime's CPU runs them
    between the convs in its blocked channel layout (channels a multiple of its block, 8 or 16)."""

    def __init__(self, channels: int = 16, growth: int = 16, layers: int = 2):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        widths = [channels + i * growth for i in range(layers)]
        self.norms = nn.ModuleList(nn.BatchNorm2d(w) for w in widths)
        self.convs = nn.ModuleList(nn.Conv2d(w, growth, 3, padding=1) for w in widths)
        for bn in self.norms:  # (statistics away from (0, 1), as in ConvBN)
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            nn.init.uniform_(bn.weight, 0.5, 1.5)
            nn.init.uniform_(bn.bias, -0.2, 0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for norm, conv in zip(self.norms, self.convs, strict=True):
            x = torch.cat([x, conv(F.relu(norm(x)))], 1)
        return x


class ClassToken(nn.Module):
    """CvT's last stage: a residual add into a LayerNorm whose output is cut into the class token and the
    patch tokens (two slices), the sum read again (so a fused norm writes it as a second output)."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.proj, self.norm = nn.Linear(dim, dim), nn.LayerNorm(dim)
        nn.init.normal_(self.norm.weight)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = x + self.proj(x)
        h = self.norm(s)
        return s, 2 * h[:, :1], h[:, 1:] + 1


class Encoder(nn.Module):
    """One `nn.TransformerEncoderLayer` (post-norm, GELU) with dropout off."""

    def __init__(self, d_model: int = 16, heads: int = 2, ff: int = 32, norm_first: bool = False):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            d_model, heads, ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class Attention(nn.Module):
    """Multi-head self-attention spelled out (matmul, scale, softmax, matmul) or through SDPA."""

    def __init__(self, d_model: int = 16, heads: int = 2, use_sdpa: bool = False):
        super().__init__()
        self.heads, self.head_dim, self.use_sdpa = heads, d_model // heads, use_sdpa
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v)
        else:
            scores = q @ k.transpose(-2, -1) / self.head_dim**0.5
            y = torch.softmax(scores, dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(batch, seq, d_model))


class NormAct(nn.Module):
    """LayerNorm (affine) followed by one activation: the vertical-fusion target."""

    def __init__(self, dim: int = 32, act: str = "gelu"):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.act = {"gelu": nn.GELU(), "tanh": nn.Tanh(), "gelu_tanh": nn.GELU(approximate="tanh")}[act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.norm(x))


class AudioFeatures(nn.Module):
    """A speech model's feature extractor (wav2vec2's): strided 1-D convs over the waveform, the first
    normalized by a group norm with one group per channel, the second by a layer norm over channels
    written with transposes around it, each followed by GELU."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.conv0 = nn.Conv1d(1, channels, 5, stride=2, bias=False)
        self.norm0 = nn.GroupNorm(channels, channels)
        self.conv1 = nn.Conv1d(channels, channels, 3, stride=2, bias=False)
        self.norm1 = nn.LayerNorm(channels)
        for norm in (self.norm0, self.norm1):  # (not the identity a fresh norm is)
            nn.init.normal_(norm.weight, 1.0, 0.3)
            nn.init.normal_(norm.bias, 0.0, 0.3)

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.norm0(self.conv0(wave[:, None])))
        h = F.gelu(self.norm1(self.conv1(h).transpose(1, 2)).transpose(1, 2))
        return h.transpose(1, 2)


class SplitCat(nn.Module):
    """Uneven split of the last dim, a different chain per slice, concatenated back (not batchable as is)."""

    def __init__(self, sizes: tuple[int, ...] = (8, 8, 16)):
        super().__init__()
        self.sizes = list(sizes)
        self.norms = nn.ModuleList(nn.LayerNorm(s) for s in sizes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = torch.split(x, self.sizes, dim=-1)
        return torch.cat([F.gelu(norm(p)) for norm, p in zip(self.norms, parts, strict=True)], dim=-1)


class ChunkStack(nn.Module):
    """Equal chunks of a [B, N*D] batch, the same LayerNorm → tanh on each, stacked on a new axis 1."""

    def __init__(self, n: int = 4, d: int = 8):
        super().__init__()
        self.n = n
        self.norm = nn.LayerNorm(d, eps=0.0, elementwise_affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.tanh(self.norm(c)) for c in torch.chunk(x, self.n, dim=-1)], dim=1)


class EmbeddingPool(nn.Module):
    """Embedding lookup of int64 ids, a second table read with index_select, mean-pooled and projected."""

    def __init__(self, vocab: int = 32, dim: int = 8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.randn(16, dim) * 0.1)
        self.proj = nn.Linear(dim, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.index_select(self.position, 0, torch.arange(ids.shape[1]))
        return self.proj((self.embed(ids) + positions).mean(dim=1))


class Buffers(nn.Module):
    """A persistent and a non-persistent buffer next to a parameter."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.register_buffer("scale", torch.linspace(0.5, 1.5, dim))
        self.register_buffer("offset", torch.full((dim,), 0.25), persistent=False)
        self.linear = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(self.linear(x * self.scale + self.offset), (x.shape[-1],))


class CondBranches(nn.Module):
    """`torch.cond` on a data-dependent predicate; the dynamo exporter turns it into an ONNX If."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def positive(x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(self.linear(x))

        def negative(x: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(x) * 2.0

        return torch.cond(x.sum() > 0, positive, negative, (x,))


class RepeatedLayer(nn.Module):
    """A loop whose trip count is an input; scripted, the TorchScript exporter turns it into an ONNX Loop."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        for _ in range(int(steps)):
            x = torch.tanh(self.linear(x))
        return x
