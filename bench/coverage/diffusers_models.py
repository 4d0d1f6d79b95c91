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


class JointDenoise(nn.Module):
    """SD3's MMDiT called as a sampler calls it: latent, text states, pooled text embedding and timestep
    in."""

    def __init__(self, transformer: nn.Module):
        super().__init__()
        self.transformer = transformer

    def forward(self, sample, timestep, context, pooled):
        return self.transformer(
            hidden_states=sample, encoder_hidden_states=context, pooled_projections=pooled, timestep=timestep
        ).sample


def sd3() -> Architecture:
    from diffusers import SD3Transformer2DModel

    # (joint attention over image and text tokens, AdaLayerNormZero on both streams, RMS-normed q and k)
    transformer = SD3Transformer2DModel(
        sample_size=8, patch_size=2, in_channels=4, out_channels=4, num_layers=2, attention_head_dim=32,
        num_attention_heads=2, joint_attention_dim=32, caption_projection_dim=64, pooled_projection_dim=32,
        pos_embed_max_size=8, qk_norm="rms_norm",
    )  # fmt: skip
    args = (_draw(BATCH, 4, 8, 8), _timesteps(), _draw(BATCH, 8, 32), _draw(BATCH, 32))
    return Architecture("diffusers_sd3", "diffusers", JointDenoise(transformer), args, None, {})


class FluxDenoise(nn.Module):
    """Flux's transformer on packed latent tokens, with the image and text position ids as buffers."""

    def __init__(self, transformer: nn.Module, image_tokens: int, text_tokens: int):
        super().__init__()
        self.transformer = transformer
        side = int(image_tokens**0.5)
        rows, cols = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
        image_ids = torch.stack([torch.zeros_like(rows), rows, cols], -1).reshape(-1, 3).float()
        self.register_buffer("image_ids", image_ids)
        self.register_buffer("text_ids", torch.zeros(text_tokens, 3))

    def forward(self, sample, timestep, context, pooled):
        return self.transformer(
            hidden_states=sample, encoder_hidden_states=context, pooled_projections=pooled,
            timestep=timestep, img_ids=self.image_ids, txt_ids=self.text_ids,
        ).sample  # fmt: skip


def flux() -> Architecture:
    from diffusers import FluxTransformer2DModel

    # (double-stream blocks as SD3's, then single-stream blocks of attention and MLP in parallel; 3-axis
    # rotary positions computed in float64; AdaLayerNormZero and AdaLayerNormContinuous)
    transformer = FluxTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32, axes_dims_rope=(4, 6, 6),
    )  # fmt: skip
    args = (_draw(BATCH, 16, 16), torch.tensor([0.1, 0.7][:BATCH]), _draw(BATCH, 8, 32), _draw(BATCH, 32))
    return Architecture("diffusers_flux", "diffusers", FluxDenoise(transformer, 16, 8), args, None, {})


def unet1d() -> Architecture:
    from diffusers import UNet1DModel

    # (1-d convs with group norm and Mish, Fourier timestep features concatenated as channels, 1-d attention)
    unet = UNet1DModel(
        sample_size=64, in_channels=2, out_channels=2, extra_in_channels=64, block_out_channels=(32, 32, 64)
    )
    args = (_draw(BATCH, 2, 64), _timesteps())
    return Architecture("diffusers_unet1d", "diffusers", Denoise(unet), args, None, {})


def vq_model() -> Architecture:
    from diffusers import VQModel

    # (AutoencoderKL's group-normed encoder and decoder around a nearest-codebook-entry quantizer)
    vae = VQModel(
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        num_vq_embeddings=32,
        **TINY,
    )
    args = (_draw(BATCH, 3, 32, 32),)
    return Architecture("diffusers_vq", "diffusers", TinyReconstruct(vae), args, "vae", {"num_heads": 0})


class ControlResiduals(nn.Module):
    """A ControlNet's residuals for the UNet (one per down block output, and the middle block's), flattened
    and concatenated into one tensor."""

    def __init__(self, controlnet: nn.Module):
        super().__init__()
        self.controlnet = controlnet

    def forward(self, sample, timestep, context, condition):
        out = self.controlnet(sample, timestep, encoder_hidden_states=context, controlnet_cond=condition)
        return torch.cat([t.flatten(1) for t in (*out.down_block_res_samples, out.mid_block_res_sample)], 1)


def controlnet() -> Architecture:
    from diffusers import ControlNetModel

    # (the conditional UNet's encoder half, a conv embedding of the condition image, zero convs: given
    # random weights here so that the outputs depend on the rest)
    model = ControlNetModel(
        in_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        conditioning_embedding_out_channels=(16, 32),
        **TINY,
    )
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "zero_conv" in name or "controlnet_" in name:
                param.copy_(0.1 * torch.randn(param.shape, generator=torch.Generator().manual_seed(2)))
    args = (_draw(BATCH, 4, 16, 16), _timesteps(), _draw(BATCH, 8, 32), _draw(BATCH, 3, 32, 32))
    return Architecture(
        "diffusers_controlnet", "diffusers", ControlResiduals(model), args, "unet", {"num_heads": 0}
    )


BUILDERS = {
    "diffusers_unet2d": unet2d,
    "diffusers_unet2d_condition": unet2d_condition,
    "diffusers_autoencoder_kl": autoencoder_kl,
    "diffusers_dit": dit,
    "diffusers_pixart": pixart,
    "diffusers_autoencoder_tiny": autoencoder_tiny,
    "diffusers_sd3": sd3,
    "diffusers_flux": flux,
    "diffusers_unet1d": unet1d,
    "diffusers_vq": vq_model,
    "diffusers_controlnet": controlnet,
}
