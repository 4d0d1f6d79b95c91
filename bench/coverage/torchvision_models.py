"""torchvision's mobile and efficient CNNs (inference batch norms after convs, hard-swish, SiLU,
squeeze-excitation, channel shuffles) and MaxViT (MBConv blocks, block and grid attention), on 32x32
images with 10 classes."""

from __future__ import annotations

from .building import Architecture, images


def _classifier(name: str, factory: str, **kwargs) -> Architecture:
    from torchvision import models

    module = getattr(models, factory)(weights=None, num_classes=10, **kwargs)
    return Architecture(name, "torchvision", module, images(), None, {})


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


BUILDERS = {
    "tv_mobilenet_v3": mobilenet_v3,
    "tv_efficientnet": efficientnet,
    "tv_regnet": regnet,
    "tv_shufflenet_v2": shufflenet,
    "tv_maxvit": maxvit,
}
