"""torchvision's CNNs (inference batch norms after convs or before them in DenseNet, ReLU, ReLU6,
hard-swish, SiLU, squeeze-excitation, channel shuffles, concatenated features) and MaxViT (MBConv blocks,
block and grid attention), on 32x32 images with 10 classes; 64x64 for ResNet-18, DenseNet-121,
SqueezeNet 1.1 and EfficientNetV2-S, so that more than one pixel reaches their last stage."""

from __future__ import annotations

from .building import Architecture, images


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
}
