"""The architectures the coverage run exercises, built from their libraries with small configs and random
weights (nothing is downloaded).

Each builder returns an ``Architecture``: an eval-mode module that takes tensors and returns one tensor,
example inputs, and the ``model_type`` ONNX Runtime's transformer optimizer knows it by (None where that
optimizer has no model type for it). Norm weights are drawn at random, so a fusion that drops or
misplaces one changes the outputs (freshly built norms have all-ones scales and zero biases).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .recsys import FeatureTower

HIDDEN, LAYERS, HEADS, FFN, VOCAB, SEQ, BATCH = 64, 2, 4, 128, 512, 16, 2


@dataclass
class Architecture:
    name: str
    library: str
    module: nn.Module
    args: tuple[torch.Tensor, ...]
    ort_model_type: str | None
    # Options for ORT's optimizer, which cannot read the sizes off some graphs (the number of heads).
    ort_options: dict


class LastHiddenState(nn.Module):
    """Calls a transformers model with keyword inputs and returns its last hidden state, so every exporter
    sees a plain tensor-in, tensor-out module."""

    def __init__(self, model: nn.Module, input_name: str, with_mask: bool = False):
        super().__init__()
        self.model, self.input_name, self.with_mask = model, input_name, with_mask

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inputs = {self.input_name: x}
        if self.with_mask:
            inputs["attention_mask"] = torch.ones_like(x)
        return self.model(**inputs).last_hidden_state


def randomize_norms(module: nn.Module, seed: int = 0) -> nn.Module:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for child in module.modules():
            if "norm" not in type(child).__name__.lower():
                continue
            for name in ("weight", "bias"):
                param = getattr(child, name, None)
                if isinstance(param, nn.Parameter) and param.dim() >= 1:
                    base = 1.0 if name == "weight" else 0.0
                    param.copy_(base + 0.2 * torch.randn(param.shape, generator=generator))
    return module


def _tokens() -> tuple[torch.Tensor]:
    return (torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(0)),)


def _images(size: int = 32) -> tuple[torch.Tensor]:
    return (torch.randn(BATCH, 3, size, size, generator=torch.Generator().manual_seed(0)),)


def _hf(config_class: str, model_class: str, input_name: str, with_mask: bool = False, **config) -> nn.Module:
    import transformers

    config = getattr(transformers, config_class)(**config)
    config._attn_implementation = "eager"  # attention as matmuls: what ORT's optimizer fuses
    model = getattr(transformers, model_class)(config)
    return LastHiddenState(model, input_name, with_mask)


def bert() -> Architecture:
    module = _hf(
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
    return Architecture("hf_bert", "transformers", module, _tokens(), "bert", {"num_heads": HEADS})


def gpt2() -> Architecture:
    module = _hf(
        # Without an attention mask, the mask code looks for packed sequences with torch.diff, which the
        # TorchScript exporter cannot write; users of decoders pass a mask anyway.
        "GPT2Config",
        "GPT2Model",
        "input_ids",
        with_mask=True,
        n_embd=HIDDEN,
        n_layer=LAYERS,
        n_head=HEADS,
        n_inner=FFN,
        vocab_size=VOCAB,
        n_positions=64,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    return Architecture("hf_gpt2", "transformers", module, _tokens(), "gpt2", {"num_heads": HEADS})


def vit_hf() -> Architecture:
    module = _hf(
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
    return Architecture("hf_vit", "transformers", module, _images(), "vit", {"num_heads": HEADS})


def t5_encoder() -> Architecture:
    module = _hf(
        "T5Config",
        "T5EncoderModel",
        "input_ids",
        d_model=HIDDEN,
        d_ff=FFN,
        d_kv=HIDDEN // HEADS,
        num_layers=LAYERS,
        num_heads=HEADS,
        vocab_size=VOCAB,
        use_cache=False,
    )
    return Architecture("hf_t5_encoder", "transformers", module, _tokens(), "t5", {"num_heads": HEADS})


def _decoder(name: str, config_class: str, model_class: str) -> Architecture:
    # ORT's optimizer has no model type for these decoders; its t5 type fuses their RMS norms
    # (SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization). With a mask, as GPT-2 is called.
    module = _hf(
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
    return Architecture(name, "transformers", module, _tokens(), "t5", {"num_heads": HEADS})


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
    return Architecture("tv_vit", "torchvision", module, _images(), "vit", {"num_heads": HEADS})


def swin_tv() -> Architecture:
    from torchvision.models.swin_transformer import SwinTransformer

    module = SwinTransformer(
        patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4], num_classes=10
    )
    return Architecture("tv_swin", "torchvision", module, _images(), "swin", {"num_heads": 0})


def convnext_tv() -> Architecture:
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    module = ConvNeXt([CNBlockConfig(32, 64, 2), CNBlockConfig(64, None, 2)], num_classes=10)
    return Architecture("tv_convnext", "torchvision", module, _images(), None, {})


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
}


def build(name: str, seed: int = 0) -> Architecture:
    torch.manual_seed(seed)
    architecture = BUILDERS[name]()
    randomize_norms(architecture.module, seed)
    architecture.module.eval()
    return architecture
