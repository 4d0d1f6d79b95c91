"""The architectures the coverage run exercises, built from their libraries with small configs and random
weights (nothing is downloaded).

Each builder returns an ``Architecture``: an eval-mode module that takes tensors and returns one tensor,
example inputs, and the ``model_type`` ONNX Runtime's transformer optimizer knows it by (None where that
optimizer has no model type for it). Norm weights are drawn at random, so a fusion that drops or
misplaces one changes the outputs (freshly built norms have all-ones scales and zero biases).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import diffusers_models, hf_decoders, hf_encoders, hf_speech, hf_vision, torchvision_models
from .building import (
    BATCH,
    FFN,
    HEADS,
    HIDDEN,
    LAYERS,
    VOCAB,
    Architecture,
    LastHiddenState,
    hf,
    images,
    randomize_norms,
    tokens,
)
from .recsys import FeatureTower

# (re-exported: the tests build their models from these)
__all__ = ["HEADS", "HIDDEN", "LAYERS", "VOCAB", "Architecture", "LastHiddenState"]
__all__ += ["build", "randomize_norms", "tokens"]


def bert() -> Architecture:
    module = hf(
        "BertConfig",
        "BertModel",
        "input_ids",
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    )
    return Architecture("hf_bert", "transformers", module, tokens(), "bert", {"num_heads": HEADS})


def gpt2() -> Architecture:
    module = hf(
        # Without an attention mask, the mask code looks for packed sequences with torch.diff, which the
        # TorchScript exporter cannot write; users of decoders pass a mask anyway.
        "GPT2Config",
        "GPT2Model",
        "input_ids",
        with_mask=True,
        **hf_decoders.GPT2_SIZES,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    return Architecture("hf_gpt2", "transformers", module, tokens(), "gpt2", {"num_heads": HEADS})


def vit_hf() -> Architecture:
    module = hf(
        "ViTConfig",
        "ViTModel",
        "pixel_values",
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        image_size=32,
        patch_size=8,
    )
    return Architecture("hf_vit", "transformers", module, images(), "vit", {"num_heads": HEADS})


def t5_encoder() -> Architecture:
    module = hf("T5Config", "T5EncoderModel", "input_ids", **hf_encoders.T5_SIZES)
    return Architecture("hf_t5_encoder", "transformers", module, tokens(), "t5", {"num_heads": HEADS})


def _decoder(name: str, config_class: str, model_class: str) -> Architecture:
    # ORT's optimizer has no model type for these decoders; its t5 type fuses their RMS norms
    # (SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization). With a mask, as GPT-2 is called.
    module = hf(
        config_class,
        model_class,
        "input_ids",
        with_mask=True,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS // 2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        use_cache=False,
    )
    return Architecture(name, "transformers", module, tokens(), "t5", {"num_heads": HEADS})


def llama() -> Architecture:
    return _decoder("hf_llama", "LlamaConfig", "LlamaModel")


def qwen2() -> Architecture:
    return _decoder("hf_qwen2", "Qwen2Config", "Qwen2Model")


def mistral() -> Architecture:
    return _decoder("hf_mistral", "MistralConfig", "MistralModel")


def vit_tv() -> Architecture:
    from torchvision.models import VisionTransformer

    module = VisionTransformer(
        image_size=32,
        patch_size=8,
        num_layers=LAYERS,
        num_heads=HEADS,
        hidden_dim=HIDDEN,
        mlp_dim=FFN,
        num_classes=10,
    )
    return Architecture("tv_vit", "torchvision", module, images(), "vit", {"num_heads": HEADS})


def swin_tv() -> Architecture:
    from torchvision.models.swin_transformer import SwinTransformer

    module = SwinTransformer(
        patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4], num_classes=10
    )
    return Architecture("tv_swin", "torchvision", module, images(), "swin", {"num_heads": 0})


def convnext_tv() -> Architecture:
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    module = ConvNeXt([CNBlockConfig(32, 64, 2), CNBlockConfig(64, None, 2)], num_classes=10)
    return Architecture("tv_convnext", "torchvision", module, images(), None, {})


def recsys() -> Architecture:
    module = FeatureTower(features=16, vocab=64, dim=16)
    return Architecture(
        "recsys_feature_tower", "torch.nn", module, module.example_inputs(BATCH * 4), None, {}
    )


BUILDERS: dict[str, Callable[[], Architecture]] = {
    "hf_bert": bert,
    "hf_gpt2": gpt2,
    "hf_vit": vit_hf,
    "hf_t5_encoder": t5_encoder,
    "hf_llama": llama,
    "hf_qwen2": qwen2,
    "hf_mistral": mistral,
    "tv_vit": vit_tv,
    "tv_swin": swin_tv,
    "tv_convnext": convnext_tv,
    "recsys_feature_tower": recsys,
    **hf_encoders.BUILDERS,
    **hf_decoders.BUILDERS,
    **hf_vision.BUILDERS,
    **hf_speech.BUILDERS,
    **torchvision_models.BUILDERS,
    **diffusers_models.BUILDERS,
}


def build(name: str, seed: int = 0) -> Architecture:
    torch.manual_seed(seed)
    architecture = BUILDERS[name]()
    randomize_norms(architecture.module, seed)
    architecture.module.eval()
    return architecture
