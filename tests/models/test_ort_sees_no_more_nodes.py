"""Never more work for the runtime: ONNX Runtime's own optimized graph (CPU EP, every optimization on) of
graphopt's output has no more nodes than its optimized graph of the original, and no more of any one op
(views excepted, which horizontal fusion adds), so a fusion ONNX Runtime makes on the original (FastGelu
from GELU's tanh formula, SkipLayerNormalization) is never traded for a decomposition it no longer fuses.

Over the test zoo, the bundled models and small real architectures (transformers' GPT-2 from both
exporters, BERT, ViT, LLaMA and T5's encoder, random weights).
"""

from collections import Counter
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
import torch

import graphopt
from graphopt.fused import DOMAIN
from graphopt.ort import library_path
from models import zoo
from models.onnx_export import export_dynamo, export_torchscript

MODELS = Path(__file__).resolve().parents[2] / "models"
VIEWS = {("", "Reshape")}
# Where N table lookups become one (batch_embedding_bags), the one lookup on the joined table and the
# arithmetic that keeps each feature's indices in its own rows are ops the original may not have run
# at the top level (its lookups were Loops): these may grow there, while the total still shrinks.
BATCHED_LOOKUP_OPS = {("", op) for op in ("Gather", "ReduceSum", "ReduceMean", "Mul", "Unsqueeze")}
BATCHED_LOOKUP_OPS |= {("", op) for op in ("Concat", "Less", "Where", "Add")}


def ort_optimized_ops(model: onnx.ModelProto, folder: Path) -> Counter:
    path = folder / f"ort_{len(list(folder.iterdir()))}.onnx"
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(path)
    options.register_custom_ops_library(library_path())
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return Counter(_family(node.domain, node.op_type) for node in onnx.load(path).graph.node)


# One GEMM is one GEMM whether its bias add rides in its epilogue (Gemm) or in the fused activation
# after it (MatMul + graphopt.AffineAct, where ORT would have had Gemm + Gelu): counted as one family.
_MATMULS = {("", "MatMul"), ("", "Gemm"), ("com.microsoft", "FusedMatMul"), ("com.microsoft", "FusedGemm")}


# Pieces of one tensor: slices joined into one Split (join_slices_into_split) are fewer nodes, not more.
_SLICES = {("", "Slice"), ("", "Split")}


def _family(domain: str, op_type: str) -> tuple[str, str]:
    if (domain, op_type) in _MATMULS:
        return ("", "MatMul|Gemm")
    return ("", "Slice|Split") if (domain, op_type) in _SLICES else (domain, op_type)


def assert_no_more_work(model: onnx.ModelProto, folder: Path, may_grow=frozenset()) -> None:
    optimized, _ = graphopt.optimize(model, verify=False)  # (numerics are checked where each pass is tested)
    before, after = ort_optimized_ops(model, folder), ort_optimized_ops(optimized, folder)
    assert sum(after.values()) <= sum(before.values()), f"ORT runs {dict(after)}, was {dict(before)}"
    grown = {
        op: (before[op], count)
        for op, count in after.items()
        if op[0] != DOMAIN and op not in VIEWS and op not in may_grow and count > before[op]
    }
    assert not grown, f"more of these ops (before, after) in ORT's graph: {grown}"


def _zoo_param(entry):
    marks = [pytest.mark.slow] if "dynamo" in entry.tags else []
    return pytest.param(entry, id=entry.name, marks=marks)


# (ONNX Runtime cannot run this entry's If on a scalar boolean from numpy; a test of its own covers it.)
# (per_feature_split_linear: batching its N Linears writes one batched MatMul + Add where ORT ran N
# Gemms; fewer nodes, but "more MatMul": the batching's trade, measured by bench/bench_per_feature.py.)
ZOO = [
    _zoo_param(e)
    for e in zoo.onnx_models()
    if e.name != "if_outer_scope.helper" and not e.name.startswith("per_feature_split_linear.")
]


@pytest.mark.parametrize("entry", ZOO)
def test_zoo(entry, tmp_path):
    may_grow = BATCHED_LOOKUP_OPS if "embedding_bag" in entry.tags else frozenset()
    assert_no_more_work(entry.build(), tmp_path, may_grow)


@pytest.mark.parametrize("name", ["mlp.onnx", "split_stack.onnx"])
def test_bundled(name, tmp_path):
    assert_no_more_work(onnx.load(MODELS / name), tmp_path)


def _llama():
    import transformers

    from bench.coverage.architectures import HEADS, HIDDEN, LAYERS, VOCAB, LastHiddenState

    config = transformers.LlamaConfig(
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        use_cache=False,
    )
    config._attn_implementation = "eager"
    return LastHiddenState(transformers.LlamaModel(config), "input_ids")


def _architecture(name):
    from bench.coverage import architectures

    if name == "hf_llama":
        torch.manual_seed(0)
        return architectures.randomize_norms(_llama()).eval(), architectures.tokens()
    built = architectures.build(name)
    return built.module, built.args


# (LLaMA's mask code calls torch.diff, which the TorchScript exporter cannot write.)
REAL = [
    ("hf_gpt2", "dynamo"),
    ("hf_gpt2", "torchscript"),
    ("hf_bert", "torchscript"),
    ("hf_vit", "dynamo"),
    ("hf_llama", "dynamo"),
    ("hf_t5_encoder", "torchscript"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "exporter"), REAL, ids=[f"{n}.{e}" for n, e in REAL])
def test_real_architecture(name, exporter, tmp_path):
    module, args = _architecture(name)
    if exporter == "dynamo":
        model = export_dynamo(module, args)
    else:
        model = export_torchscript(module, args, input_names=["input_0"], opset=17)
    assert_no_more_work(model, tmp_path)


class MobileBlock(torch.nn.Module):
    """EfficientNet's block as both exporters write it: convs, SiLU spelled as x * sigmoid(x) (which
    ONNX Runtime's CPU runs in its blocked channel layout between convs), squeeze-excitation."""

    def __init__(self, channels: int = 16):
        super().__init__()
        conv = torch.nn.Conv2d
        self.expand, self.depthwise = conv(channels, channels, 1), conv(channels, channels, 3, padding=1)
        self.squeeze, self.excite = conv(channels, 8, 1), conv(8, channels, 1)
        self.project = conv(channels, channels, 1)

    def forward(self, x):
        h = torch.nn.functional.silu(self.depthwise(torch.nn.functional.silu(self.expand(x))))
        scale = torch.sigmoid(self.excite(torch.nn.functional.silu(self.squeeze(h.mean((2, 3), True)))))
        return x + self.project(h * scale)


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_convolution_block(exporter, tmp_path):
    torch.manual_seed(0)
    module, args = MobileBlock().eval(), (torch.randn(1, 16, 8, 8),)
    if exporter == "dynamo":
        model = export_dynamo(module, args)
    else:
        model = export_torchscript(module, args, input_names=["input_0"], opset=17)
    assert_no_more_work(model, tmp_path)
