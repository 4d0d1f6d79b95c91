"""Small random-initialized modules in the shape of diffusers' UNet2D and AutoencoderKL blocks:
``GroupNorm → SiLU → Conv`` twice per residual block, the block's sum feeding the next block's norm.

diffusers itself is not a dependency; these follow its ``ResnetBlock2D`` (norm1, silu, conv1, time
embedding added, norm2, silu, conv2, 1x1 shortcut where the width changes) and its ``conv_norm_out``.
"""

from __future__ import annotations

import torch
from torch import nn


class ResnetBlock(nn.Module):
    def __init__(self, channels: int, out_channels: int, groups: int = 8, eps: float = 1e-6, temb: int = 0):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, channels, eps=eps)
        self.conv1 = nn.Conv2d(channels, out_channels, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb, out_channels) if temb else None
        self.norm2 = nn.GroupNorm(groups, out_channels, eps=eps)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.shortcut = nn.Conv2d(channels, out_channels, 1) if channels != out_channels else None

    def forward(self, x: torch.Tensor, temb: torch.Tensor | None = None) -> torch.Tensor:
        h = self.conv1(nn.functional.silu(self.norm1(x)))
        if self.time_emb_proj is not None and temb is not None:
            h = h + self.time_emb_proj(nn.functional.silu(temb))[:, :, None, None]
        h = self.conv2(nn.functional.silu(self.norm2(h)))
        return (x if self.shortcut is None else self.shortcut(x)) + h


class TinyUNet(nn.Module):
    """conv_in, resnet blocks with a time embedding (one widening), a downsample, conv_norm_out:
    7 ``group_norm → silu``, two of them after a residual sum."""

    def __init__(self, channels: int = 32, groups: int = 8, temb: int = 64):
        super().__init__()
        self.temb = temb
        self.conv_in = nn.Conv2d(4, channels, 3, padding=1)
        self.time = nn.Sequential(nn.Linear(temb, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.block1 = ResnetBlock(channels, channels, groups, temb=temb)
        self.block2 = ResnetBlock(channels, 2 * channels, groups, temb=temb)
        self.down = nn.Conv2d(2 * channels, 2 * channels, 3, stride=2, padding=1)
        self.block3 = ResnetBlock(2 * channels, 2 * channels, groups, temb=temb)
        self.conv_norm_out = nn.GroupNorm(groups, 2 * channels, eps=1e-5)
        self.conv_out = nn.Conv2d(2 * channels, 4, 3, padding=1)

    def forward(self, sample: torch.Tensor, timestep_embedding: torch.Tensor) -> torch.Tensor:
        temb = self.time(timestep_embedding)
        h = self.block2(self.block1(self.conv_in(sample), temb), temb)
        h = self.block3(self.down(h), temb)
        return self.conv_out(nn.functional.silu(self.conv_norm_out(h)))


class TinyVAEDecoder(nn.Module):
    """AutoencoderKL's decoder in small: conv_in, resnet blocks (the first two back to back, so the
    second's norm reads the first's sum), an upsample, conv_norm_out: 7 ``group_norm → silu``."""

    def __init__(self, channels: int = 32, groups: int = 8):
        super().__init__()
        self.conv_in = nn.Conv2d(4, 2 * channels, 3, padding=1)
        self.mid1 = ResnetBlock(2 * channels, 2 * channels, groups)
        self.mid2 = ResnetBlock(2 * channels, 2 * channels, groups)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.up_conv = nn.Conv2d(2 * channels, 2 * channels, 3, padding=1)
        self.block = ResnetBlock(2 * channels, channels, groups)
        self.conv_norm_out = nn.GroupNorm(groups, channels, eps=1e-6)
        self.conv_out = nn.Conv2d(channels, 3, 3, padding=1)

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        h = self.mid2(self.mid1(self.conv_in(latents)))
        h = self.block(self.up_conv(self.up(h)))
        return self.conv_out(nn.functional.silu(self.conv_norm_out(h)))


def randomize_norms(module: nn.Module, seed: int = 0) -> nn.Module:
    """Gives every GroupNorm a random scale and bias (a fresh one has ones and zeros, which fusion
    drops, so the scale and bias paths would go untested)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for norm in module.modules():
            if isinstance(norm, nn.GroupNorm) and norm.affine:
                norm.weight.copy_(1.0 + 0.3 * torch.randn(norm.weight.shape, generator=gen))
                norm.bias.copy_(0.3 * torch.randn(norm.bias.shape, generator=gen))
    return module


def unet_inputs(batch: int = 2, size: int = 16, temb: int = 64, dtype=torch.float32) -> tuple:
    gen = torch.Generator().manual_seed(1)
    sample = torch.randn(batch, 4, size, size, generator=gen).to(dtype)
    return sample, torch.randn(batch, temb, generator=gen).to(dtype)


def vae_inputs(batch: int = 2, size: int = 8, dtype=torch.float32) -> tuple:
    return (torch.randn(batch, 4, size, size, generator=torch.Generator().manual_seed(2)).to(dtype),)
