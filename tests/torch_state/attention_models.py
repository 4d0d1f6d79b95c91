"""Small random-weight attention models as a PyTorch user exports them: GPT-2 and LLaMA from
transformers (tokens in, last hidden state out) and a Vision Transformer written as torchvision's
(patch convolution, class token, nn.MultiheadAttention encoder blocks, linear head)."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from bench.coverage.architectures import LastHiddenState, randomize_norms

HIDDEN, LAYERS, HEADS, FFN, VOCAB, SEQ, BATCH = 32, 2, 4, 64, 50, 8, 2


def _tokens() -> tuple[torch.Tensor]:
    return (torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(1)),)


def gpt2() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    import transformers

    config = transformers.GPT2Config(
        n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=FFN, vocab_size=VOCAB, n_positions=SEQ,
        use_cache=False, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return LastHiddenState(transformers.GPT2Model(config), "input_ids", with_mask=True), _tokens()


def llama() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    import transformers

    config = transformers.LlamaConfig(
        hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        num_key_value_heads=HEADS // 2, vocab_size=VOCAB, max_position_embeddings=SEQ, use_cache=False,
    )  # fmt: skip
    return LastHiddenState(transformers.LlamaModel(config), "input_ids"), _tokens()


class _EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        h, _ = self.self_attention(h, h, h, need_weights=False)
        x = x + h
        return x + self.mlp(self.ln_2(x))


class VisionTransformer(nn.Module):
    def __init__(self, image: int = 16, patch: int = 4, classes: int = 10):
        super().__init__()
        self.conv_proj = nn.Conv2d(3, HIDDEN, patch, patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, HIDDEN))
        self.pos_embedding = nn.Parameter(0.02 * torch.randn(1, (image // patch) ** 2 + 1, HIDDEN))
        self.layers = nn.Sequential(*(_EncoderBlock(HIDDEN, HEADS, FFN) for _ in range(LAYERS)))
        self.ln = nn.LayerNorm(HIDDEN, eps=1e-6)
        self.head = nn.Linear(HIDDEN, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        n = images.shape[0]
        x = self.conv_proj(images).reshape(n, HIDDEN, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        x = self.ln(self.layers(x + self.pos_embedding))
        return self.head(x[:, 0])


def vit() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    images = torch.randn(BATCH, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return VisionTransformer(), (images,)


MODELS = {"gpt2": gpt2, "llama": llama, "vit": vit}


def built(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    module, inputs = MODELS[name]()
    return randomize_norms(module.eval()), inputs


def exported(module: nn.Module, inputs) -> torch.export.ExportedProgram:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(module, inputs)
