"""torchvision's CNNs (inference batch norms after convs or before them in DenseNet, ReLU, ReLU6,
hard-swish, SiLU, squeeze-excitation, channel shuffles, concatenated features) and MaxViT (MBConv blocks,
block and grid attention), on 32x32 images with 10 classes; 64x64 for ResNet-18, DenseNet-121,
SqueezeNet 1.1 and EfficientNetV2-S, so that more than one pixel reaches their last stage."""

from __future__ import annotations

import torch
from torch import nn

from .building import BATCH, Architecture, images


def _classifier(name: str, factory: str, size: int = 32, **kwargs) -> Architecture:
    from torchvision import models

    module = getattr(models, factory)(weights=None, num_classes=10, **kwargs)
    return Architecture(name, "torchvision", module, images(size), None, {})


def mobilenet_v3() -> Architecture:
    return _classifier("tv_mobilenet_v3", "mobilenet_v3_small")


def efficientnet() -> Architecture:
    return _classifier("tv_efficientnet", "efficientnet_b0")


def regnet() -> Architecture:
    return _classifier("tv_regnet", "regnet_y_400mf")


def shufflenet() -> Architecture:
    return _classifier("tv_shufflenet_v2", "shufflenet_v2_x0_5")


def maxvit() -> Architecture:
    from torchvision.models.maxvit import MaxVit

    # (the stem and each block halve the image: 32 -> 16 -> 8 -> 4, which the 4x4 partitions divide)
    module = MaxVit(
        input_size=(32, 32),
        stem_channels=16,
        partition_size=4,
        block_channels=[32, 64],
        block_layers=[1, 1],
        head_dim=16,
        stochastic_depth_prob=0.0,
        num_classes=10,
    )
    return Architecture("tv_maxvit", "torchvision", module, images(), "vit", {"num_heads": 0})


def resnet18() -> Architecture:
    # (batch norm after every conv, ReLU after the residual add)
    return _classifier("tv_resnet18", "resnet18", size=64)


def densenet121() -> Architecture:
    # (pre-activation: batch norm and ReLU before each conv, on concatenated features)
    return _classifier("tv_densenet121", "densenet121", size=64)


def mobilenet_v2() -> Architecture:
    # (batch norm and ReLU6 after convs, inverted residuals with a linear bottleneck)
    return _classifier("tv_mobilenet_v2", "mobilenet_v2")


def squeezenet() -> Architecture:
    # (no norms: ReLU after every conv, fire modules concatenating two expand convs)
    return _classifier("tv_squeezenet1_1", "squeezenet1_1", size=64)


def efficientnet_v2() -> Architecture:
    # (fused MBConv blocks: batch norm and SiLU after full convs, squeeze-excitation in the later stages)
    return _classifier("tv_efficientnet_v2_s", "efficientnet_v2_s", size=64)


def video_mc3() -> Architecture:
    # (Conv3d and BatchNorm3d: a 3x7x7 stem and 3x3x3 convs in the first stage, 1x3x3 after; one block
    # per stage; 4 frames of 32x32)
    from torchvision.models.video.resnet import (
        BasicBlock,
        BasicStem,
        Conv3DNoTemporal,
        Conv3DSimple,
        VideoResNet,
    )

    module = VideoResNet(
        BasicBlock, [Conv3DSimple] + [Conv3DNoTemporal] * 3, [1, 1, 1, 1], BasicStem, num_classes=10
    )
    clip = torch.randn(BATCH, 3, 4, 32, 32, generator=torch.Generator().manual_seed(0))
    return Architecture("tv_mc3", "torchvision", module, (clip,), None, {})


def googlenet() -> Architecture:
    # (inception blocks: four branches of convs with batch norm and ReLU, concatenated; max pools)
    return _classifier("tv_googlenet", "googlenet", size=64, aux_logits=False, init_weights=True)


def inception_v3() -> Architecture:
    # (factorized 1x7 / 7x1 convs, average-pool branches; 75x75 is its smallest input)
    return _classifier("tv_inception_v3", "inception_v3", size=80, aux_logits=False, init_weights=True)


def vgg11_bn() -> Architecture:
    from torchvision.models import vgg11_bn

    # (batch norm and ReLU after every conv, five max pools; a narrow classifier in place of the 4096-wide)
    module = vgg11_bn(weights=None, num_classes=10)
    module.classifier = nn.Sequential(
        nn.Linear(512 * 7 * 7, 64), nn.ReLU(True), nn.Dropout(), nn.Linear(64, 10)
    )
    return Architecture("tv_vgg11_bn", "torchvision", module, images(), None, {})


def resnext() -> Architecture:
    from torchvision.models.resnet import Bottleneck, ResNet

    # (ResNeXt-50 32x4d's grouped bottlenecks, one block per stage)
    module = ResNet(Bottleneck, [1, 1, 1, 1], groups=32, width_per_group=4, num_classes=10)
    return Architecture("tv_resnext", "torchvision", module, images(64), None, {})


def mnasnet() -> Architecture:
    # (depthwise-separable inverted residuals with batch norm and ReLU, no squeeze-excitation)
    return _classifier("tv_mnasnet", "mnasnet0_5")


class SegmentationOut(nn.Module):
    """A torchvision segmentation model's ``out`` map (its forward returns a dict)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)["out"]


def deeplabv3() -> Architecture:
    from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large

    # (MobileNetV3's hard-swish backbone with dilated convs, the ASPP head's pooled branch upsampled)
    model = deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4, aux_loss=False)
    return Architecture("tv_deeplabv3", "torchvision", SegmentationOut(model), images(64), None, {})


def lraspp() -> Architecture:
    from torchvision.models.segmentation import lraspp_mobilenet_v3_large

    # (a sigmoid-gated global-pool branch multiplying the high-level features, bilinear upsampling)
    model = lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4)
    return Architecture("tv_lraspp", "torchvision", SegmentationOut(model), images(64), None, {})


def swin_v2() -> Architecture:
    from torchvision.models.swin_transformer import PatchMergingV2, SwinTransformer, SwinTransformerBlockV2

    # (post-norm residuals, cosine attention with a logit scale, a log-spaced continuous position bias MLP)
    module = SwinTransformer(
        patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4], num_classes=10,
        block=SwinTransformerBlockV2, downsample_layer=PatchMergingV2,
    )  # fmt: skip
    return Architecture("tv_swin_v2", "torchvision", module, images(), "swin", {"num_heads": 0})


BUILDERS = {
    "tv_mobilenet_v3": mobilenet_v3,
    "tv_efficientnet": efficientnet,
    "tv_regnet": regnet,
    "tv_shufflenet_v2": shufflenet,
    "tv_maxvit": maxvit,
    "tv_resnet18": resnet18,
    "tv_densenet121": densenet121,
    "tv_mobilenet_v2": mobilenet_v2,
    "tv_squeezenet1_1": squeezenet,
    "tv_efficientnet_v2_s": efficientnet_v2,
    "tv_mc3": video_mc3,
    "tv_googlenet": googlenet,
    "tv_inception_v3": inception_v3,
    "tv_vgg11_bn": vgg11_bn,
    "tv_resnext": resnext,
    "tv_mnasnet": mnasnet,
    "tv_deeplabv3": deeplabv3,
    "tv_lraspp": lraspp,
    "tv_swin_v2": swin_v2,
}
