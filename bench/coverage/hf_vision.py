"""Transformers' vision models: transformers (CLIP's vision tower, DeiT, BEiT, Swin, SegFormer's
encoder, DINOv2, CvT, PVT-v2), hybrids (MobileViT, LeViT, FocalNet) and CNNs (ConvNeXt, ResNet,
PoolFormer, MobileNetV2), on 32x32 images. ViT-like models are ``vit`` to ONNX Runtime's optimizer, Swin
is ``swin``, CLIP is ``clip``; for SegFormer, PVT-v2 and ConvNeXt its generic ``bert`` fusions find the
layer norms; the others have no model type there."""

from __future__ import annotations

import torch
from torch import nn

from .building import BATCH, FFN, HEADS, HIDDEN, LAYERS, Architecture, hf, hf_model, images

ORT_HEADS = {"num_heads": HEADS}
VIT_SIZES = dict(
    hidden_size=HIDDEN,
    num_hidden_layers=LAYERS,
    num_attention_heads=HEADS,
    intermediate_size=FFN,
    image_size=32,
    patch_size=8,
)


def clip_vision() -> Architecture:
    module = hf("CLIPVisionConfig", "CLIPVisionModel", "pixel_values", **VIT_SIZES)
    return Architecture("hf_clip_vision", "transformers", module, images(), "clip", ORT_HEADS)


def deit() -> Architecture:
    module = hf("DeiTConfig", "DeiTModel", "pixel_values", **VIT_SIZES)
    return Architecture("hf_deit", "transformers", module, images(), "vit", ORT_HEADS)


def beit() -> Architecture:
    # (relative position bias in every layer, layer scale on both residual branches)
    module = hf("BeitConfig", "BeitModel", "pixel_values", use_relative_position_bias=True, **VIT_SIZES)
    return Architecture("hf_beit", "transformers", module, images(), "vit", ORT_HEADS)


def swin() -> Architecture:
    module = hf(
        "SwinConfig",
        "SwinModel",
        "pixel_values",
        image_size=32,
        patch_size=4,
        embed_dim=32,
        depths=[2, 2],
        num_heads=[2, 4],
        window_size=4,
    )
    return Architecture("hf_swin", "transformers", module, images(), "swin", {"num_heads": 0})


# SegFormer's and PvT-v2's two stages: overlapping patch embeddings, spatial-reduction attention
MIX_TRANSFORMER_STAGES = dict(
    num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], patch_sizes=[7, 3], strides=[4, 2],
    num_attention_heads=[1, 2],
)  # fmt: skip


def segformer() -> Architecture:
    module = hf(
        "SegformerConfig",
        "SegformerModel",
        "pixel_values",
        hidden_sizes=[32, 64],
        mlp_ratios=[2, 2],
        **MIX_TRANSFORMER_STAGES,
    )
    return Architecture("hf_segformer", "transformers", module, images(), "bert", {"num_heads": 0})


def convnext() -> Architecture:
    module = hf(
        "ConvNextConfig",
        "ConvNextModel",
        "pixel_values",
        hidden_sizes=[32, 64],
        depths=[2, 2],
        num_stages=2,
        image_size=32,
    )
    return Architecture("hf_convnext", "transformers", module, images(), "bert", {"num_heads": 0})


def resnet() -> Architecture:
    module = hf(
        "ResNetConfig",
        "ResNetModel",
        "pixel_values",
        embedding_size=16,
        hidden_sizes=[16, 32],
        depths=[1, 1],
        layer_type="basic",
    )
    return Architecture("hf_resnet", "transformers", module, images(), None, {})


def mobilevit() -> Architecture:
    # (inverted residuals with batch norm and SiLU, then transformer blocks on unfolded patches)
    module = hf(
        "MobileViTConfig",
        "MobileViTModel",
        "pixel_values",
        image_size=32,
        hidden_sizes=[16, 24, 32],
        neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32],
    )
    return Architecture("hf_mobilevit", "transformers", module, images(), None, {})


def levit() -> Architecture:
    # (batch norm after every linear, attention biases indexed by position)
    module = hf(
        "LevitConfig",
        "LevitModel",
        "pixel_values",
        image_size=32,
        patch_size=16,
        hidden_sizes=[32, 48, 64],
        num_attention_heads=[1, 2, 2],
        depths=[1, 1, 1],
        key_dim=[8, 8, 8],
    )
    return Architecture("hf_levit", "transformers", module, images(), None, {})


def poolformer() -> Architecture:
    # (group norm with one group, as a layer norm over C, H, W; residual adds into it)
    module = hf(
        "PoolFormerConfig",
        "PoolFormerModel",
        "pixel_values",
        hidden_sizes=[16, 32],
        depths=[1, 1],
        num_encoder_blocks=2,
        patch_sizes=[7, 3],
        strides=[4, 2],
        padding=[2, 1],
    )
    return Architecture("hf_poolformer", "transformers", module, images(), None, {})


def dinov2() -> Architecture:
    module = hf("Dinov2Config", "Dinov2Model", "pixel_values", **VIT_SIZES)
    return Architecture("hf_dinov2", "transformers", module, images(), "vit", ORT_HEADS)


def convnextv2() -> Architecture:
    # (global response normalization after the MLP's GELU)
    module = hf(
        "ConvNextV2Config",
        "ConvNextV2Model",
        "pixel_values",
        hidden_sizes=[16, 32],
        depths=[1, 1],
        num_stages=2,
    )
    return Architecture("hf_convnextv2", "transformers", module, images(), "bert", {"num_heads": 0})


def cvt() -> Architecture:
    # (convolutional Q, K, V projections with batch norm inside attention; LayerNorm and GELU around them)
    module = hf(
        "CvtConfig",
        "CvtModel",
        "pixel_values",
        embed_dim=[16, 32, 64],
        num_heads=[1, 2, 4],
        depth=[1, 2, 3],
    )
    return Architecture("hf_cvt", "transformers", module, images(), None, {})


def pvt_v2() -> Architecture:
    # (depthwise conv and GELU inside the MLP, spatial-reduction attention with its own LayerNorm)
    module = hf(
        "PvtV2Config",
        "PvtV2Model",
        "pixel_values",
        image_size=32,
        hidden_sizes=[16, 32],
        mlp_ratios=[4, 4],
        **MIX_TRANSFORMER_STAGES,
    )
    return Architecture("hf_pvt_v2", "transformers", module, images(), "bert", {"num_heads": 0})


def focalnet() -> Architecture:
    # (focal modulation: stacked depthwise convs with GELU, gated; LayerNorm before it and the MLP)
    module = hf(
        "FocalNetConfig",
        "FocalNetModel",
        "pixel_values",
        image_size=32,
        patch_size=4,
        embed_dim=16,
        depths=[1, 1],
        focal_levels=[2, 2],
        focal_windows=[3, 3],
    )
    return Architecture("hf_focalnet", "transformers", module, images(), None, {})


def mobilenet_v2() -> Architecture:
    # (batch norm and ReLU6 after every conv, TensorFlow's "same" padding as explicit pads)
    module = hf("MobileNetV2Config", "MobileNetV2Model", "pixel_values", depth_multiplier=0.35, image_size=32)
    return Architecture("hf_mobilenet_v2", "transformers", module, images(), None, {})


def siglip_vision() -> Architecture:
    # (CLIP-like encoder with tanh-GELU, no class token, an attention-pooling head beside the last state)
    module = hf("SiglipVisionConfig", "SiglipVisionModel", "pixel_values", **VIT_SIZES)
    return Architecture("hf_siglip_vision", "transformers", module, images(), "vit", ORT_HEADS)


def swinv2() -> Architecture:
    # (post-norm residual blocks, cosine attention with a learned logit scale, a continuous position bias MLP)
    module = hf(
        "Swinv2Config",
        "Swinv2Model",
        "pixel_values",
        image_size=32,
        patch_size=4,
        embed_dim=32,
        depths=[2, 2],
        num_heads=[2, 4],
        window_size=4,
    )
    return Architecture("hf_swinv2", "transformers", module, images(), "swin", {"num_heads": 0})


class MaskedEncoder(nn.Module):
    """ViTMAE's encoder with the random masking's noise as an input (argsorted: which patches it keeps)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixel_values, noise=noise).last_hidden_state


def vit_mae() -> Architecture:
    # (ViT's encoder on the quarter of the patches the noise keeps, gathered by argsort)
    module = MaskedEncoder(hf_model("ViTMAEConfig", "ViTMAEModel", mask_ratio=0.75, **VIT_SIZES))
    noise = torch.rand(BATCH, 16, generator=torch.Generator().manual_seed(1))
    return Architecture("hf_vit_mae", "transformers", module, (*images(), noise), "vit", ORT_HEADS)


BUILDERS = {
    "hf_clip_vision": clip_vision,
    "hf_deit": deit,
    "hf_beit": beit,
    "hf_swin": swin,
    "hf_segformer": segformer,
    "hf_convnext": convnext,
    "hf_resnet": resnet,
    "hf_mobilevit": mobilevit,
    "hf_levit": levit,
    "hf_poolformer": poolformer,
    "hf_dinov2": dinov2,
    "hf_convnextv2": convnextv2,
    "hf_cvt": cvt,
    "hf_pvt_v2": pvt_v2,
    "hf_focalnet": focalnet,
    "hf_mobilenet_v2": mobilenet_v2,
    "hf_siglip_vision": siglip_vision,
    "hf_swinv2": swinv2,
    "hf_vit_mae": vit_mae,
}
