"""diffusers' UNets and VAE with tiny configs (two resolutions, 32 and 64 channels, groups of 8):
``group_norm → silu`` in every ResNet block, attention with a group norm in front, a timestep embedding.
ONNX Runtime's optimizer knows them as ``unet`` and ``vae``."""

from __future__ import annotations

import torch
from torch import nn

from .building import BATCH, Architecture

TINY = dict(block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8)


class Denoise(nn.Module):
    """A UNet called as a sampler calls it: noisy sample and timestep (and the text encoder's states)
    in, predicted noise out."""

    def __init__(self, unet: nn.Module):
        super().__init__()
        self.unet = unet

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor, *context: torch.Tensor) -> torch.Tensor:
        states = {"encoder_hidden_states": context[0]} if context else {}
        return self.unet(sample, timestep, **states).sample


class Reconstruct(nn.Module):
    """An autoencoder's encode and decode at the posterior's mode (deterministic)."""

    def __init__(self, vae: nn.Module):
        super().__init__()
        self.vae = vae

    def forward(self, sample: torch.Tensor) -> torch.Tensor:
        return self.vae(sample, sample_posterior=False).sample


def _draw(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def _timesteps() -> torch.Tensor:
    return torch.tensor([10.0, 500.0][:BATCH])


def unet2d() -> Architecture:
    from diffusers import UNet2DModel

    unet = UNet2DModel(
        sample_size=16,
        in_channels=3,
        out_channels=3,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        **TINY,
    )
    args = (_draw(BATCH, 3, 16, 16), _timesteps())
    return Architecture("diffusers_unet2d", "diffusers", Denoise(unet), args, "unet", {"num_heads": 0})


def unet2d_condition() -> Architecture:
    from diffusers import UNet2DConditionModel

    unet = UNet2DConditionModel(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        **TINY,
    )
    args = (_draw(BATCH, 4, 16, 16), _timesteps(), _draw(BATCH, 8, 32))
    return Architecture(
        "diffusers_unet2d_condition", "diffusers", Denoise(unet), args, "unet", {"num_heads": 0}
    )


def autoencoder_kl() -> Architecture:
    from diffusers import AutoencoderKL

    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        sample_size=32,
        **TINY,
    )
    args = (_draw(BATCH, 3, 32, 32),)
    return Architecture(
        "diffusers_autoencoder_kl", "diffusers", Reconstruct(vae), args, "vae", {"num_heads": 0}
    )


BUILDERS = {
    "diffusers_unet2d": unet2d,
    "diffusers_unet2d_condition": unet2d_condition,
    "diffusers_autoencoder_kl": autoencoder_kl,
}
