"""Transformers' speech encoders: wav2vec2 with both of its feature extractors, and WavLM and HuBERT with
the first. The first normalizes its first conv with a group norm of one group per channel
(``feat_extract_norm="group"``; the dynamo exporter writes it as a bare InstanceNormalization), the
second every conv with a layer norm over channels written between transposes (``"layer"``, with the
pre-norm "stable" encoder), each followed by GELU. Raw waveforms in (a quarter second at 16 kHz), last
hidden state out; ONNX Runtime's optimizer has no model type for them."""

from __future__ import annotations

import torch

from .building import BATCH, FFN, HEADS, HIDDEN, LAYERS, Architecture, hf

SPEECH = dict(
    hidden_size=HIDDEN,
    num_hidden_layers=LAYERS,
    num_attention_heads=HEADS,
    intermediate_size=FFN,
    conv_dim=(16, 16),
    conv_kernel=(10, 3),
    conv_stride=(5, 2),
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=4,
)


def waves(batch: int = BATCH, samples: int = 4000) -> tuple[torch.Tensor]:
    return (torch.randn(batch, samples, generator=torch.Generator().manual_seed(0)),)


def wav2vec2() -> Architecture:
    module = hf("Wav2Vec2Config", "Wav2Vec2Model", "input_values", feat_extract_norm="group", **SPEECH)
    return Architecture("hf_wav2vec2", "transformers", module, waves(), None, {})


def wav2vec2_stable() -> Architecture:
    module = hf(
        "Wav2Vec2Config",
        "Wav2Vec2Model",
        "input_values",
        feat_extract_norm="layer",
        do_stable_layer_norm=True,
        **SPEECH,
    )
    return Architecture("hf_wav2vec2_stable", "transformers", module, waves(), None, {})


def wavlm() -> Architecture:
    # (wav2vec2's group-norm feature extractor, and a gated relative position bias in every layer)
    module = hf(
        "WavLMConfig",
        "WavLMModel",
        "input_values",
        feat_extract_norm="group",
        num_buckets=32,
        max_bucket_distance=100,
        **SPEECH,
    )
    return Architecture("hf_wavlm", "transformers", module, waves(), None, {})


def hubert() -> Architecture:
    # (wav2vec2's group-norm feature extractor and post-norm encoder, under HuBERT's classes)
    module = hf("HubertConfig", "HubertModel", "input_values", feat_extract_norm="group", **SPEECH)
    return Architecture("hf_hubert", "transformers", module, waves(), None, {})


def data2vec_audio() -> Architecture:
    # (wav2vec2's layer-norm feature extractor, a stack of conv position embeddings with LayerNorm, post-norm)
    module = hf(
        "Data2VecAudioConfig", "Data2VecAudioModel", "input_values", num_conv_pos_embeddings=4,
        **{k: v for k, v in SPEECH.items() if k != "num_conv_pos_embeddings"},
    )  # fmt: skip
    return Architecture("hf_data2vec_audio", "transformers", module, waves(), None, {})


BUILDERS = {
    "hf_wav2vec2": wav2vec2,
    "hf_wav2vec2_stable": wav2vec2_stable,
    "hf_wavlm": wavlm,
    "hf_hubert": hubert,
    "hf_data2vec_audio": data2vec_audio,
}
