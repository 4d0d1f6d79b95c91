"""Transformers' decoder-only language models beyond LLaMA's family: GPT-NeoX (parallel residual), OPT,
BLOOM (ALiBi), Falcon (parallel attention), Phi (partial rotary, one norm per layer), Gemma (RMS norm
of ``1 + weight``), GPT-J, StableLM, Qwen3, Gemma2, Gemma3 and OLMo2 (RMS norms of queries and keys,
norms after the sublayers), Cohere, Phi3, Starcoder2 and GPTBigCode. Tokens in, last hidden state out;
called with an attention mask, as decoders are (without one the mask code looks for packed sequences
with ``torch.diff``, which the TorchScript exporter cannot write)."""

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

# The sizes of the decoders whose configs take GPT-2's names.
GPT2_SIZES = dict(n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=FFN, vocab_size=VOCAB, n_positions=64)


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
        rotary_dim=HIDDEN // HEADS // 2,
        **GPT2_SIZES,
        **DECODER,
    )
    return Architecture("hf_gptj", "transformers", module, tokens(), None, {})


def stablelm() -> Architecture:
    # (LayerNorm with bias, partial rotary, SiLU-gated MLP)
    module = hf(
        "StableLmConfig", "StableLmModel", "input_ids", with_mask=True, num_key_value_heads=HEADS, **SIZES
    )
    return Architecture("hf_stablelm", "transformers", module, tokens(), None, {})


# Grouped-query attention: half as many key and value heads as query heads, each of the usual width.
GQA = dict(num_key_value_heads=HEADS // 2, head_dim=HIDDEN // HEADS)


def _decoder(name: str, family: str, ort_type: str | None, **config) -> Architecture:
    """transformers' ``{family}Config`` / ``{family}Model`` with the suite's sizes and ``config``;
    ``ort_type``: ONNX Runtime's model type for it (given the head count), or None."""
    module = hf(f"{family}Config", f"{family}Model", "input_ids", with_mask=True, **config, **SIZES)
    return Architecture(name, "transformers", module, tokens(), ort_type, ORT_HEADS if ort_type else {})


def qwen3() -> Architecture:
    # (RMS norm on each head's queries and keys, before the rotary embedding)
    return _decoder("hf_qwen3", "Qwen3", "t5", **GQA)


def gemma2() -> Architecture:
    # (RMS norms of 1 + weight before and after attention and MLP, GELU-tanh gated MLP, tanh soft-capping)
    return _decoder("hf_gemma2", "Gemma2", "t5", sliding_window=8, **GQA)


def gemma3_text() -> Architecture:
    # (Gemma2's norms before and after the sublayers, plus RMS norms of 1 + weight on queries and keys)
    return _decoder("hf_gemma3_text", "Gemma3Text", "t5", sliding_window=8, **GQA)


def olmo2() -> Architecture:
    # (RMS norms after attention and MLP, none before; RMS norm over the whole query and key projections)
    return _decoder("hf_olmo2", "Olmo2", "t5", num_key_value_heads=HEADS // 2)


def cohere() -> Architecture:
    # (LayerNorm without bias, written out in float32; attention and MLP in parallel off one norm)
    return _decoder("hf_cohere", "Cohere", None, num_key_value_heads=HEADS // 2)


def phi3() -> Architecture:
    # (LLaMA's RMS norms and SiLU-gated MLP, fused QKV and gate-up projections, split in the graph)
    return _decoder("hf_phi3", "Phi3", "t5", num_key_value_heads=HEADS // 2)


def starcoder2() -> Architecture:
    # (LayerNorm with bias, GELU-tanh MLP with biases, sliding-window attention)
    return _decoder("hf_starcoder2", "Starcoder2", None, num_key_value_heads=HEADS // 2, sliding_window=8)


def gpt_bigcode() -> Architecture:
    # (GPT-2's LayerNorms and GELU-tanh, with multi-query attention: one key and value head)
    module = hf(
        "GPTBigCodeConfig", "GPTBigCodeModel", "input_ids", with_mask=True, multi_query=True, **GPT2_SIZES,
        **DECODER,
    )  # fmt: skip
    return Architecture("hf_gpt_bigcode", "transformers", module, tokens(), "gpt2", ORT_HEADS)


def mixtral() -> Architecture:
    # (sparse mixture of experts: a softmax router picks 2 of 4 SiLU-gated experts per token; RMS norms)
    return _decoder("hf_mixtral", "Mixtral", "t5", num_local_experts=4, num_experts_per_tok=2, **GQA)


def mixtral_batched_mm() -> Architecture:
    # (Mixtral with transformers' "batched_mm" experts: each token's chosen experts' weights gathered and
    # applied in batched matmuls; the default, "grouped_mm", is torch._grouped_mm after a histc of the
    # routing, which neither ONNX exporter can write)
    return _decoder(
        "hf_mixtral_batched_mm", "Mixtral", "t5", num_local_experts=4, num_experts_per_tok=2,
        experts_implementation="batched_mm", **GQA,
    )  # fmt: skip


def olmoe() -> Architecture:
    # (OLMo's RMS-normed queries and keys, and a top-2 of 4 experts MLP without renormalized routing
    # weights; transformers' "eager" experts: a loop over the experts that the routing hit, each taking
    # its tokens by nonzero)
    return _decoder(
        "hf_olmoe", "Olmoe", "t5", num_experts=4, num_experts_per_tok=2, experts_implementation="eager", **GQA
    )


def granite() -> Architecture:
    # (LLaMA's layers with scalar multipliers: on the embeddings, on each residual branch, on attention
    # scores)
    return _decoder(
        "hf_granite", "Granite", "t5", embedding_multiplier=2.0, residual_multiplier=0.5,
        attention_multiplier=0.25, **GQA,
    )  # fmt: skip


def persimmon() -> Architecture:
    # (LayerNorms with bias, LayerNorms on each head's queries and keys, partial rotary, squared-ReLU MLP)
    return _decoder("hf_persimmon", "Persimmon", None, partial_rotary_factor=0.5, qk_layernorm=True)


def mamba() -> Architecture:
    # (no attention: RMS norm, a causal depthwise conv1d with SiLU and a selective scan, unrolled over the
    # sequence by the slow path transformers takes without its CUDA kernels)
    module = hf(
        "MambaConfig",
        "MambaModel",
        "input_ids",
        hidden_size=HIDDEN,
        state_size=8,
        num_hidden_layers=LAYERS,
        expand=2,
        conv_kernel=4,
        vocab_size=VOCAB,
        **DECODER,
    )
    return Architecture("hf_mamba", "transformers", module, tokens(), None, {})


BUILDERS = {
    "hf_gpt_neox": gpt_neox,
    "hf_opt": opt,
    "hf_bloom": bloom,
    "hf_falcon": falcon,
    "hf_phi": phi,
    "hf_gemma": gemma,
    "hf_gptj": gptj,
    "hf_stablelm": stablelm,
    "hf_qwen3": qwen3,
    "hf_gemma2": gemma2,
    "hf_gemma3_text": gemma3_text,
    "hf_olmo2": olmo2,
    "hf_cohere": cohere,
    "hf_phi3": phi3,
    "hf_starcoder2": starcoder2,
    "hf_gpt_bigcode": gpt_bigcode,
    "hf_mixtral": mixtral,
    "hf_mixtral_batched_mm": mixtral_batched_mm,
    "hf_olmoe": olmoe,
    "hf_granite": granite,
    "hf_persimmon": persimmon,
    "hf_mamba": mamba,
}
