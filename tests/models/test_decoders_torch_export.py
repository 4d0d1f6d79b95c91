"""RMSNorm decoders from transformers (small configs, random weights) reach the same norm fusions through
torch.export as through ONNX, in float32 and in bfloat16, and compute what the original computes."""

import numpy as np
import pytest
import torch
from exporting import export_onnx, near_misses

import graphopt

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow

HIDDEN, LAYERS, VOCAB = 64, 2, 512
# Per layer two norms (the second after the attention's residual add, the first after the previous
# layer's MLP residual add), then the final norm: 2 * LAYERS + 1 norms, 2 * LAYERS residual adds.
NORMS, RESIDUAL_ADDS = 2 * LAYERS + 1, 2 * LAYERS
# Largest error against the float64 model, per dtype: outputs of the final norm are a few units, and
# each of a few roundings on the way costs up to half a unit in the last place (2**-8 in bfloat16).
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 0.05}
PATHS = ("exported", "decomposed", "onnx")


class LastHiddenState(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state


def decoder(name: str) -> torch.nn.Module:
    config_class, model_class = {
        "llama": ("LlamaConfig", "LlamaModel"),
        "qwen2": ("Qwen2Config", "Qwen2Model"),
    }[name]
    config = getattr(transformers, config_class)(
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config)
    with torch.no_grad():
        for module in model.modules():
            if "RMSNorm" in type(module).__name__:
                module.weight.copy_(1 + 0.2 * torch.randn(module.weight.shape))
    return LastHiddenState(model).eval()


def tokens() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(0))


def optimized_report(module, path: str, dtype: torch.dtype):
    module = module.to(dtype)
    args = (tokens(),)
    if path == "onnx":
        # (ONNX Runtime's CPU provider lacks 16-bit kernels these models need: no numeric check there)
        return None, graphopt.optimize(export_onnx(module, args, "dynamo"), verify=dtype == torch.float32)[1]
    program = torch.export.export(module, args)
    if path == "decomposed":
        program = program.run_decompositions()
    optimized, report = graphopt.optimize(program, check_each_pass=True)
    assert report.verification["ok"], report.verification["summary"]
    return optimized, report


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_float32_folds_every_scale_and_fuses_every_residual_add(name, path):
    _, report = optimized_report(decoder(name), path, torch.float32)
    counts = report.rule_counts
    assert counts.get("fold_norm_scale") == NORMS, counts
    assert counts.get("fuse_add_norm") == RESIDUAL_ADDS, counts


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_16_bits_fuse_the_residual_adds_between_casts_and_say_why_scales_stay(name, dtype, path):
    _, report = optimized_report(decoder(name), path, dtype)
    counts = report.rule_counts
    assert counts.get("fuse_add_norm_between_casts") == RESIDUAL_ADDS, counts
    assert "fold_norm_scale" not in counts
    reasons = near_misses(report, "fold_norm_scale_after_cast")
    narrow = str(dtype).removeprefix("torch.")
    assert len(reasons) == NORMS and all(f"multiplies in {narrow} after" in r for r in reasons)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_optimized_program_matches_the_float64_model(name, dtype):
    module = decoder(name)
    with torch.no_grad():
        want = LastHiddenState(module.model.double())(tokens()).numpy()
    optimized, _ = optimized_report(decoder(name), "exported", dtype)
    with torch.no_grad():
        got = optimized.module()(tokens()).double().numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCE[dtype])
