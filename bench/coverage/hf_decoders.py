"""Transformers' decoder-only language models beyond LLaMA's family: GPT-NeoX (parallel residual), OPT,
BLOOM (ALiBi), Falcon (parallel attention), Phi (partial rotary, one norm per layer) and Gemma (RMS norm
of ``1 + weight``). Tokens in, last hidden state out; called with an attention mask, as decoders are
(without one the mask code looks for packed sequences with ``torch.diff``, which the TorchScript
exporter cannot write)."""

from __future__ import annotations

from .building import FFN, HEADS, HIDDEN, LAYERS, VOCAB, Architecture, hf, tokens

ORT_HEADS = {"num_heads": HEADS}
DECODER = dict(use_cache=False, bos_token_id=0, eos_token_id=0, pad_token_id=0)
# The sizes of the decoders whose configs take the LLaMA-style names.
SIZES = dict(
    hidden_size=HIDDEN,
    intermediate_size=FFN,
    num_hidden_layers=LAYERS,
    num_attention_heads=HEADS,
    vocab_size=VOCAB,
    max_position_embeddings=64,
    **DECODER,
)


def gpt_neox() -> Architecture:
    module = hf(
        "GPTNeoXConfig",
        "GPTNeoXModel",
        "input_ids",
        with_mask=True,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        **DECODER,
    )
    return Architecture("hf_gpt_neox", "transformers", module, tokens(), "gpt_neox", ORT_HEADS)


def opt() -> Architecture:
    module = hf(
        "OPTConfig",
        "OPTModel",
        "input_ids",
        with_mask=True,
        hidden_size=HIDDEN,
        word_embed_proj_dim=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        ffn_dim=FFN,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        **DECODER,
    )
    return Architecture("hf_opt", "transformers", module, tokens(), "gpt2", ORT_HEADS)


def bloom() -> Architecture:
    module = hf(
        "BloomConfig",
        "BloomModel",
        "input_ids",
        with_mask=True,
        hidden_size=HIDDEN,
        n_layer=LAYERS,
        n_head=HEADS,
        vocab_size=VOCAB,
        **DECODER,
    )
    return Architecture("hf_bloom", "transformers", module, tokens(), "gpt2", ORT_HEADS)


def falcon() -> Architecture:
    module = hf(
        "FalconConfig",
        "FalconModel",
        "input_ids",
        with_mask=True,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        **DECODER,
    )
    return Architecture("hf_falcon", "transformers", module, tokens(), "gpt2", ORT_HEADS)


def phi() -> Architecture:
    module = hf("PhiConfig", "PhiModel", "input_ids", with_mask=True, **SIZES)
    return Architecture("hf_phi", "transformers", module, tokens(), "phi", ORT_HEADS)


def gemma() -> Architecture:
    # ORT has no model type for Gemma; its t5 type fuses RMS norms, as for LLaMA.
    module = hf(
        "GemmaConfig",
        "GemmaModel",
        "input_ids",
        with_mask=True,
        num_key_value_heads=HEADS // 2,
        head_dim=HIDDEN // HEADS,
        **SIZES,
    )
    return Architecture("hf_gemma", "transformers", module, tokens(), "t5", ORT_HEADS)


def gptj() -> Architecture:
    # (parallel attention and MLP off one LayerNorm; rotary code that writes torch.tensor([]))
    module = hf(
        "GPTJConfig",
        "GPTJModel",
        "input_ids",
        with_mask=True,
        n_embd=HIDDEN,
        n_layer=LAYERS,
        n_head=HEADS,
        n_inner=FFN,
        rotary_dim=HIDDEN // HEADS // 2,
        vocab_size=VOCAB,
        n_positions=64,
        **DECODER,
    )
    return Architecture("hf_gptj", "transformers", module, tokens(), None, {})


def stablelm() -> Architecture:
    # (LayerNorm with bias, partial rotary, SiLU-gated MLP)
    module = hf(
        "StableLmConfig", "StableLmModel", "input_ids", with_mask=True, num_key_value_heads=HEADS, **SIZES
    )
    return Architecture("hf_stablelm", "transformers", module, tokens(), None, {})


BUILDERS = {
    "hf_gpt_neox": gpt_neox,
    "hf_opt": opt,
    "hf_bloom": bloom,
    "hf_falcon": falcon,
    "hf_phi": phi,
    "hf_gemma": gemma,
    "hf_gptj": gptj,
    "hf_stablelm": stablelm,
}
