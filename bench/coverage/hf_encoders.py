"""Transformers' text and speech encoders (BERT's relatives, ModernBERT, BART's and Whisper's encoders):
tokens or features in, last hidden state out. ONNX Runtime's optimizer knows most of them as ``bert``, BART as
``bart``."""

from __future__ import annotations

import torch

from .building import (
    BATCH,
    FFN,
    HEADS,
    HIDDEN,
    LAYERS,
    SEQ,
    VOCAB,
    Architecture,
    LastHiddenState,
    hf,
    hf_model,
    tokens,
)

BERT_SIZES = dict(
    hidden_size=HIDDEN,
    num_hidden_layers=LAYERS,
    num_attention_heads=HEADS,
    intermediate_size=FFN,
    vocab_size=VOCAB,
    max_position_embeddings=64,
)
ORT_HEADS = {"num_heads": HEADS}
# T5's size (the encoder alone, and with its decoder)
T5_SIZES = dict(
    d_model=HIDDEN, d_ff=FFN, d_kv=HIDDEN // HEADS, num_layers=LAYERS, num_heads=HEADS, vocab_size=VOCAB,
    use_cache=False,
)  # fmt: skip


def distilbert() -> Architecture:
    module = hf(
        "DistilBertConfig",
        "DistilBertModel",
        "input_ids",
        dim=HIDDEN,
        hidden_dim=FFN,
        n_layers=LAYERS,
        n_heads=HEADS,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    )
    return Architecture("hf_distilbert", "transformers", module, tokens(), "bert", ORT_HEADS)


def roberta() -> Architecture:
    module = hf("RobertaConfig", "RobertaModel", "input_ids", pad_token_id=1, **BERT_SIZES)
    return Architecture("hf_roberta", "transformers", module, tokens(), "bert", ORT_HEADS)


def mpnet() -> Architecture:
    # (relative position buckets added to every layer's attention scores)
    module = hf("MPNetConfig", "MPNetModel", "input_ids", pad_token_id=1, **BERT_SIZES)
    return Architecture("hf_mpnet", "transformers", module, tokens(), "bert", ORT_HEADS)


def albert() -> Architecture:
    # (ALBERT projects a narrower embedding up to the hidden size, and shares one layer's weights)
    module = hf("AlbertConfig", "AlbertModel", "input_ids", embedding_size=32, **BERT_SIZES)
    return Architecture("hf_albert", "transformers", module, tokens(), "bert", ORT_HEADS)


def electra() -> Architecture:
    module = hf("ElectraConfig", "ElectraModel", "input_ids", embedding_size=32, **BERT_SIZES)
    return Architecture("hf_electra", "transformers", module, tokens(), "bert", ORT_HEADS)


def deberta_v2() -> Architecture:
    # DeBERTa-v3's settings: relative attention with both position terms, bucketed, its own LayerNorm
    # on the relative embeddings, no absolute positions added to the input.
    module = hf(
        "DebertaV2Config",
        "DebertaV2Model",
        "input_ids",
        relative_attention=True,
        pos_att_type=["p2c", "c2p"],
        position_buckets=32,
        max_relative_positions=-1,
        norm_rel_ebd="layer_norm",
        position_biased_input=False,
        **BERT_SIZES,
    )
    return Architecture("hf_deberta_v2", "transformers", module, tokens(), "bert", ORT_HEADS)


def mobilebert() -> Architecture:
    # MobileBERT's bottlenecks and stacked feed-forward networks; its norms are "NoNorm" (x * w + b).
    module = hf(
        "MobileBertConfig",
        "MobileBertModel",
        "input_ids",
        hidden_size=HIDDEN,
        embedding_size=32,
        intra_bottleneck_size=32,
        true_hidden_size=32,
        num_feedforward_networks=2,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    )
    return Architecture("hf_mobilebert", "transformers", module, tokens(), "bert", ORT_HEADS)


def _bart(config_class: str, model_class: str, decoder_layers: int) -> torch.nn.Module:
    return hf_model(
        config_class,
        model_class,
        d_model=HIDDEN,
        encoder_layers=LAYERS,
        decoder_layers=decoder_layers,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        use_cache=False,
    )


def _bart_encoder(config_class: str, model_class: str) -> torch.nn.Module:
    return LastHiddenState(_bart(config_class, model_class, decoder_layers=1).get_encoder(), "input_ids")


def bart_encoder() -> Architecture:
    module = _bart_encoder("BartConfig", "BartModel")  # (post-norm layers)
    return Architecture("hf_bart_encoder", "transformers", module, tokens(), "bart", ORT_HEADS)


def mbart_encoder() -> Architecture:
    module = _bart_encoder("MBartConfig", "MBartModel")  # (pre-norm layers, a final LayerNorm)
    return Architecture("hf_mbart_encoder", "transformers", module, tokens(), "bart", ORT_HEADS)


def whisper_encoder() -> Architecture:
    model = hf_model(
        "WhisperConfig",
        "WhisperModel",
        d_model=HIDDEN,
        encoder_layers=LAYERS,
        decoder_layers=1,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN,
        num_mel_bins=16,
        max_source_positions=16,
        vocab_size=128,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
        decoder_start_token_id=0,
    )
    module = LastHiddenState(model.get_encoder(), "input_features")
    # (log-mel features: 16 bins, twice the 16 positions, which the encoder's strided conv halves)
    args = (torch.randn(BATCH, 16, 32, generator=torch.Generator().manual_seed(0)),)
    return Architecture("hf_whisper_encoder", "transformers", module, args, "bert", ORT_HEADS)


def modernbert() -> Architecture:
    # (LayerNorm without bias, GeGLU MLP, rotary positions, local and global attention layers)
    module = hf(
        "ModernBertConfig",
        "ModernBertModel",
        "input_ids",
        local_attention=8,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
        cls_token_id=0,
        sep_token_id=0,
        **BERT_SIZES,
    )
    return Architecture("hf_modernbert", "transformers", module, tokens(), "bert", ORT_HEADS)


class DecoderHiddenState(torch.nn.Module):
    """An encoder-decoder called as in teacher-forced decoding: source tokens and decoder tokens in, the
    decoder's last hidden state out (its layers attend to their own tokens causally and to the encoder's
    output)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids).last_hidden_state


def _seq2seq_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return (tokens()[0], torch.randint(0, VOCAB, (BATCH, SEQ // 2), generator=generator))


def t5() -> Architecture:
    # (T5 encoder and decoder: RMS norms, relative position buckets, the decoder's causal self-attention
    # and cross-attention to the encoder's output)
    model = hf_model("T5Config", "T5Model", num_decoder_layers=LAYERS, decoder_start_token_id=0, **T5_SIZES)
    module = DecoderHiddenState(model)
    return Architecture("hf_t5", "transformers", module, _seq2seq_inputs(), "t5", ORT_HEADS)


def bart() -> Architecture:
    # (BART encoder and decoder: post-norm layers, learned positions, cross-attention in the decoder)
    model = _bart("BartConfig", "BartModel", decoder_layers=LAYERS)
    module = DecoderHiddenState(model)
    return Architecture("hf_bart", "transformers", module, _seq2seq_inputs(), "bart", ORT_HEADS)


def clip_text() -> Architecture:
    # (CLIP's text tower: pre-norm layers with quick-GELU, causal attention, a final LayerNorm)
    module = hf(
        "CLIPTextConfig",
        "CLIPTextModel",
        "input_ids",
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    return Architecture("hf_clip_text", "transformers", module, tokens(), "clip", ORT_HEADS)


BUILDERS = {
    "hf_distilbert": distilbert,
    "hf_roberta": roberta,
    "hf_mpnet": mpnet,
    "hf_albert": albert,
    "hf_electra": electra,
    "hf_deberta_v2": deberta_v2,
    "hf_mobilebert": mobilebert,
    "hf_bart_encoder": bart_encoder,
    "hf_mbart_encoder": mbart_encoder,
    "hf_whisper_encoder": whisper_encoder,
    "hf_modernbert": modernbert,
    "hf_t5": t5,
    "hf_bart": bart,
    "hf_clip_text": clip_text,
}
