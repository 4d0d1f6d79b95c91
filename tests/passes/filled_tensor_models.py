"""Modules that make a tensor fresh and fill it in place, as torchvision's Swin and diffusers' UNet1D do,
and variants whose fills must stay (they read the input, draw random numbers, are read before they end,
or are too large to fold)."""

import torch
from torch import nn
from torch.nn import functional as F


def window_mask(like: torch.Tensor, size: int, window: int, shift: int) -> torch.Tensor:
    """torchvision's ``shifted_window_attention`` mask: nine regions of a fresh tensor numbered in place,
    then -100 between positions of a window that came from different regions."""
    mask = like.new_zeros((size, size))
    slices = ((0, -window), (-window, -shift), (-shift, None))
    count = 0
    for h in slices:
        for w in slices:
            mask[h[0] : h[1], w[0] : w[1]] = count
            count += 1
    mask = mask.view(size // window, window, size // window, window).permute(0, 2, 1, 3)
    mask = mask.reshape(-1, window * window)
    mask = mask.unsqueeze(1) - mask.unsqueeze(2)
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)


class ShiftedWindowAttention(nn.Module):
    """One shifted-window attention of Swin: roll, attention within each window plus the mask, back."""

    def __init__(self, dim=8, window=4, shift=2, heads=2):
        super().__init__()
        self.window, self.shift, self.heads = window, shift, heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, h, w, c = x.shape
        win, shift, heads = self.window, self.shift, self.heads
        x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
        x = x.view(b, h // win, win, w // win, win, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, win * win, c)
        qkv = self.qkv(x).reshape(x.size(0), win * win, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
        attn = (qkv[0] * (c // heads) ** -0.5) @ qkv[1].transpose(-2, -1)
        windows = (h // win) * (w // win)
        attn = attn.view(b, windows, heads, win * win, win * win)
        attn = attn + window_mask(x, h, win, shift).unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, heads, win * win, win * win).softmax(-1)
        x = (attn @ qkv[2]).transpose(1, 2).reshape(-1, win * win, c)
        x = self.proj(x).view(b, h // win, w // win, win, win, c).permute(0, 1, 3, 2, 4, 5)
        return torch.roll(x.reshape(b, h, w, c), shifts=(shift, shift), dims=(1, 2))


class KernelOnDiagonal(nn.Module):
    """diffusers' ``KDownsample1D``: a fresh weight with a kernel put on its diagonal by index, in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("kernel", torch.tensor([1 / 8, 3 / 8, 3 / 8, 1 / 8]))

    def forward(self, x):
        x = F.pad(x, (1, 1), "reflect")
        weight = x.new_zeros([x.shape[1], x.shape[1], self.kernel.shape[0]])
        indices = torch.arange(x.shape[1], device=x.device)
        weight[indices, indices] = self.kernel.to(weight)[None, :].expand(x.shape[1], -1)
        return F.conv1d(x, weight, stride=2)


class BiasWithSliceZeroed(nn.Module):
    """torchvision's Swin-V2: the qkv bias cloned and its key part zeroed in place."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x):
        bias = self.qkv.bias.clone()
        bias[8:16].zero_()
        return F.linear(x, self.qkv.weight, bias)


class _WithWindowMask(nn.Module):
    """A window mask that folds, beside a tensor filled in place that must not (``other``)."""

    def forward(self, x):
        y, other = self.other(x)
        return x + window_mask(x, 4, 2, 1).sum(0) + y, other


class FilledFromInput(_WithWindowMask):
    def other(self, x):
        mask = x.new_zeros(4, 4)
        mask[:2] = x[:2]
        return mask * 2, mask.sum()


class BufferFilledFromInput(_WithWindowMask):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 4))

    def other(self, x):
        self.state[:, :2] = x[:, :2]
        return self.state * 3, self.state.sum()


class FilledAtRandom(_WithWindowMask):
    def other(self, x):
        noise = torch.zeros(4, 4)
        noise[:2].uniform_()
        return noise, noise.sum()


class ReadBeforeFilled(_WithWindowMask):
    def other(self, x):
        mask = x.new_zeros(4, 4)
        before = mask + 1.0
        mask[1:3, 1:3] = 5.0
        return before * mask, mask.sum()


class FilledAndReturned(_WithWindowMask):
    def other(self, x):
        mask = x.new_zeros(4, 4)
        mask[:2] = 7.0
        return mask[2:].sum(), mask


class LargeFilledReadInPart(_WithWindowMask):
    def other(self, x):
        mask = x.new_zeros(512, 1024)  # (2 MiB in float32: twice what folding may add to a graph)
        mask[:, :8] = 1.0
        return mask[:4, :4] + mask[-4:, -4:], mask[:2, :2].sum()


class TwoFilledBeyondBudget(_WithWindowMask):
    """Two tensors of 600 KiB: the first folds, the second would take folding past its budget."""

    def other(self, x):
        first, second = x.new_zeros(300, 512), x.new_zeros(300, 512)
        first[:, :8] = 1.0
        second[:, 8:] = 2.0
        return (first * second)[:4, :4], first.sum() + second.sum()
