"""What every builder of the coverage run shares: the ``Architecture`` record, the sizes, the example
inputs, the wrapper that gives every exporter a plain tensor-in, tensor-out module, and the norm
randomization (freshly built norms have all-ones scales and zero biases, so a fusion that dropped or
misplaced one would not change the outputs)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

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
    # Export paths that cannot take this model, each with the reason (the exporter's own limit).
    skip_paths: dict[str, str] = field(default_factory=dict)


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


def tokens(batch: int = BATCH, seq: int = SEQ, vocab: int = VOCAB) -> tuple[torch.Tensor]:
    return (torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(0)),)


def images(size: int = 32, channels: int = 3) -> tuple[torch.Tensor]:
    return (torch.randn(BATCH, channels, size, size, generator=torch.Generator().manual_seed(0)),)


def hf_model(config_class: str, model_class: str, **config) -> nn.Module:
    """A transformers model from its config class, with attention written as matmuls (what ORT's
    optimizer fuses, and what every exporter can write)."""
    import transformers

    config = getattr(transformers, config_class)(**config)
    config._attn_implementation = "eager"
    return getattr(transformers, model_class)(config)


def hf(config_class: str, model_class: str, input_name: str, with_mask: bool = False, **config) -> nn.Module:
    return LastHiddenState(hf_model(config_class, model_class, **config), input_name, with_mask)
