"""Transformers' MLP bias + GELU (BERT, GPT-2's tanh formula, Whisper's encoder) fuse into AffineAct
wherever ONNX Runtime's transformer optimizer fuses BiasGelu or FastGelu, through both ONNX exporters,
and GPT-2's through torch.export; each optimized model is checked against the original."""

from pathlib import Path

import pytest
import torch

import graphopt

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow

from bench.coverage.architectures import Architecture, LastHiddenState, build, randomize_norms  # noqa: E402
from bench.coverage.exports import export  # noqa: E402
from bench.coverage.ort_fusions import ort_fusions  # noqa: E402

ORT_BIAS_ACT = ("BiasGelu", "FastGelu")
GELUS = (b"gelu", b"gelu_tanh")


def whisper() -> Architecture:
    config = transformers.WhisperConfig(
        d_model=64, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=16, vocab_size=128,
        pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    encoder = randomize_norms(transformers.WhisperModel(config).get_encoder())
    module = LastHiddenState(encoder, "input_features").eval()
    args = (torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(0)),)
    return Architecture("whisper", "transformers", module, args, "bert", {})


BUILDERS = {"bert": lambda: build("hf_bert"), "gpt2": lambda: build("hf_gpt2"), "whisper": whisper}


def gelu_affine_acts(model) -> int:
    return sum(
        1
        for n in model.graph.node
        if n.op_type == "AffineAct" and any(a.name == "activation" and a.s in GELUS for a in n.attribute)
    )


@pytest.mark.parametrize("path", ["onnx_dynamo", "onnx_torchscript"])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_onnx_bias_gelu_fused_wherever_ort_fuses_it(name, path, tmp_path: Path):
    architecture = BUILDERS[name]()
    target, _ = export(architecture, path, tmp_path)
    optimized, report = graphopt.optimize(str(target))
    assert report.verification["ok"], report.verification["summary"]
    ort = ort_fusions(target, "bert" if name == "whisper" else architecture.ort_model_type, {"num_heads": 4})
    theirs = sum(ort["fused"].get(op, 0) for op in ORT_BIAS_ACT)
    assert theirs == 2  # (one per layer)
    assert gelu_affine_acts(optimized) >= theirs


@pytest.mark.parametrize("name", list(BUILDERS))
def test_torch_export_bias_gelu(name, tmp_path: Path):
    """GPT-2's tanh formula fuses (its Conv1D's bias stays in the addmm); BERT's and Whisper's nn.Linear
    keep their bias in the GEMM (one pass for the GELU either way: see fuse_bias_act.SPLIT_LINEAR_BIAS)."""
    architecture = BUILDERS[name]()
    target, _ = export(architecture, "torch_export", tmp_path)
    optimized, report = graphopt.optimize(str(target))
    assert report.verification["ok"], report.verification["summary"]
    targets = [str(n.target) for n in optimized.graph.nodes if n.op == "call_function"]
    fused = targets.count("graphopt.affine_act.default")
    if name == "gpt2":
        assert fused == 2 and report.rule_counts.get("fuse_spelled_activation") == 2
    else:
        assert fused == 0 and not report.rule_counts.get("fuse_bias_act")
