"""diffusers' UNets and VAE with tiny configs (two resolutions, 32 and 64 channels, groups of 8):
``group_norm → silu`` in every ResNet block, attention with a group norm in front, a timestep embedding.
ONNX Runtime's optimizer knows them as ``unet`` and ``vae``. Then the diffusion transformers DiT and
PixArt (LayerNorms modulated per sample by the timestep) and AutoencoderTiny (no norms), which ORT's
optimizer has no model type for."""

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


class ClassDenoise(nn.Module):
    """A class-conditional diffusion transformer (DiT) called as a sampler calls it: noisy sample, timestep
    and class labels in, predicted noise out."""

    def __init__(self, transformer: nn.Module):
        super().__init__()
        self.transformer = transformer

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.transformer(sample, timestep=timestep, class_labels=labels).sample


class TextDenoise(nn.Module):
    """PixArt's transformer called with the text encoder's states, without its resolution and aspect-ratio
    conditions."""

    def __init__(self, transformer: nn.Module):
        super().__init__()
        self.transformer = transformer

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        conditions = {"resolution": None, "aspect_ratio": None}
        return self.transformer(
            sample, encoder_hidden_states=context, timestep=timestep, added_cond_kwargs=conditions
        ).sample


class TinyReconstruct(nn.Module):
    """AutoencoderTiny's encode, latents rounded to bytes, and decode (it has no posterior to sample)."""

    def __init__(self, vae: nn.Module):
        super().__init__()
        self.vae = vae

    def forward(self, sample: torch.Tensor) -> torch.Tensor:
        return self.vae(sample).sample


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


# The diffusion transformers' size: 2 layers of 2 heads of 32, 2x2 patches of an 8x8 latent of 4 channels.
_TRANSFORMER = dict(
    num_attention_heads=2,
    attention_head_dim=32,
    in_channels=4,
    out_channels=4,
    num_layers=2,
    sample_size=8,
    patch_size=2,
)


def dit() -> Architecture:
    from diffusers import DiTTransformer2DModel

    # (AdaLayerNormZero: LayerNorm without weights, then a per-sample scale and shift from timestep and class)
    transformer = DiTTransformer2DModel(num_embeds_ada_norm=10, **_TRANSFORMER)
    args = (_draw(BATCH, 4, 8, 8), torch.tensor([10, 500][:BATCH]), torch.tensor([1, 3][:BATCH]))
    return Architecture("diffusers_dit", "diffusers", ClassDenoise(transformer), args, None, {})


def pixart() -> Architecture:
    from diffusers import PixArtTransformer2DModel

    # (AdaLayerNormSingle: one timestep embedding plus a learned table per block shifts and scales its norms)
    transformer = PixArtTransformer2DModel(
        cross_attention_dim=64, caption_channels=32, use_additional_conditions=False, **_TRANSFORMER
    )
    args = (_draw(BATCH, 4, 8, 8), _timesteps(), _draw(BATCH, 8, 32))
    # PixArt ends with hidden_states.squeeze(1) on [N, 16, C], a no-op in torch; the dynamo exporter writes
    # it as a Squeeze of axis 1, and ONNX Runtime refuses the file ("Dimension of input 1 must be 1").
    skip = {"onnx_dynamo": "the exporter writes torch's no-op squeeze(1) of a dimension of 16 as Squeeze"}
    return Architecture(
        "diffusers_pixart", "diffusers", TextDenoise(transformer), args, None, {}, skip_paths=skip
    )


def autoencoder_tiny() -> Architecture:
    from diffusers import AutoencoderTiny

    # (no norms: ReLU after convs; latents clamped, rounded to bytes and squashed by tanh before decoding)
    vae = AutoencoderTiny(
        encoder_block_out_channels=(16, 16),
        decoder_block_out_channels=(16, 16),
        num_encoder_blocks=(1, 1),
        num_decoder_blocks=(1, 1),
        latent_channels=4,
    )
    args = (_draw(BATCH, 3, 32, 32),)
    return Architecture("diffusers_autoencoder_tiny", "diffusers", TinyReconstruct(vae), args, None, {})


BUILDERS = {
    "diffusers_unet2d": unet2d,
    "diffusers_unet2d_condition": unet2d_condition,
    "diffusers_autoencoder_kl": autoencoder_kl,
    "diffusers_dit": dit,
    "diffusers_pixart": pixart,
    "diffusers_autoencoder_tiny": autoencoder_tiny,
}
