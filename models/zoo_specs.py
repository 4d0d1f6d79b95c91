"""The eager modules behind the exported zoo entries: how each is made, its example inputs, its tags.

One spec feeds up to three exporters: `torch.onnx.export(dynamo=True)`, `torch.onnx.export(dynamo=False)`
(TorchScript) and `torch.export.export`. `exporters` says which of them apply.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from models import embeddings, mlp, per_feature_split, split_stack, zoo_modules
from models.seeding import randn, seeded

ALL_EXPORTERS = frozenset({"dynamo", "torchscript", "torch_export"})
# The seed at test size: N slices of B×D.
SEED_N, SEED_B, SEED_D = 4, 2, 8
DLRM_N = 8  # sparse features: enough for one pooled lookup to pay in every runtime
PER_FEATURE_N = 32  # per-feature norms: as many features as the acceptance model


@dataclass(frozen=True)
class ModuleSpec:
    name: str
    module: Callable[[], nn.Module] = field(repr=False)
    args: Callable[[], tuple[torch.Tensor, ...]] = field(repr=False)
    input_names: tuple[str, ...]
    tags: frozenset[str]
    exporters: frozenset[str] = ALL_EXPORTERS
    # {input name: {axis: symbolic name}}; every other dim is static.
    dynamic_axes: dict[str, dict[int, str]] | None = None


def _module(seed: int, make: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    return lambda: seeded(seed, lambda: make().eval())


def _floats(*shape: int, seed: int = 1) -> Callable[[], tuple[torch.Tensor, ...]]:
    return lambda: (randn(*shape, seed=seed),)


def _ids() -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randint(0, 32, (2, 5), generator=generator),)


def _repeat_args() -> tuple[torch.Tensor, ...]:
    return (randn(2, 8, seed=1), torch.tensor(3))


def _scripted_repeat() -> nn.Module:
    with warnings.catch_warnings():
        # TorchScript is deprecated, but scripting is the only way that exporter emits a Loop.
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(seeded(0, lambda: zoo_modules.RepeatedLayer().eval()))


def _tags(*names: str) -> frozenset[str]:
    return frozenset(names)


SPECS: tuple[ModuleSpec, ...] = (
    ModuleSpec(
        "mlp_ln_gelu",
        lambda: mlp.make_mlp(),
        _floats(4, 16),
        ("x",),
        _tags("mlp", "layer_norm", "gelu", "matmul"),
    ),
    # TorchScript has no symbolic for aten::rms_norm.
    ModuleSpec(
        "mlp_rms_silu",
        lambda: mlp.make_mlp(norm="rms", act="silu"),
        _floats(4, 16),
        ("x",),
        _tags("mlp", "rms_norm", "silu", "matmul"),
        frozenset({"dynamo", "torch_export"}),
    ),
    ModuleSpec(
        "mlp_residual",
        lambda: mlp.make_mlp(residual=True),
        _floats(4, 16),
        ("x",),
        _tags("mlp", "residual", "layer_norm", "gelu", "matmul"),
    ),
    ModuleSpec(
        "mlp_dynamic_batch",
        lambda: mlp.make_mlp(),
        _floats(4, 16),
        ("x",),
        _tags("mlp", "dynamic", "layer_norm", "gelu"),
        dynamic_axes={"x": {0: "batch"}},
    ),
    ModuleSpec(
        "conv_bn", _module(0, zoo_modules.ConvBN), _floats(2, 3, 8, 8), ("x",), _tags("conv", "batch_norm")
    ),
    ModuleSpec(
        "dense_layers", _module(0, zoo_modules.DenseLayers), _floats(2, 3, 8, 8), ("x",), _tags("conv")
    ),
    ModuleSpec("class_token", _module(0, zoo_modules.ClassToken), _floats(2, 5, 16), ("x",), _tags("slice")),
    ModuleSpec(
        "transformer_encoder",
        _module(0, zoo_modules.Encoder),
        _floats(2, 5, 16),
        ("x",),
        _tags("transformer", "attention", "layer_norm", "gelu", "residual"),
    ),
    ModuleSpec(
        "attention",
        _module(0, zoo_modules.Attention),
        _floats(2, 5, 16),
        ("x",),
        _tags("attention", "softmax", "matmul"),
    ),
    ModuleSpec(
        "attention_sdpa",
        _module(0, lambda: zoo_modules.Attention(use_sdpa=True)),
        _floats(2, 5, 16),
        ("x",),
        _tags("attention", "sdpa", "softmax", "matmul"),
    ),
    ModuleSpec(
        "ln_gelu",
        _module(0, lambda: zoo_modules.NormAct(act="gelu")),
        _floats(4, 32),
        ("x",),
        _tags("layer_norm", "gelu", "norm_act"),
    ),
    ModuleSpec(
        "ln_tanh",
        _module(0, lambda: zoo_modules.NormAct(act="tanh")),
        _floats(4, 32),
        ("x",),
        _tags("layer_norm", "tanh", "norm_act"),
    ),
    ModuleSpec(
        "ln_gelu_tanh",
        _module(0, lambda: zoo_modules.NormAct(act="gelu_tanh")),
        _floats(4, 32),
        ("x",),
        _tags("layer_norm", "gelu", "norm_act"),
    ),
    ModuleSpec(
        "audio_features",
        _module(0, lambda: zoo_modules.AudioFeatures()),
        _floats(2, 64),
        ("wave",),
        _tags("group_norm", "layer_norm", "gelu", "conv", "transpose"),
    ),
    ModuleSpec(
        "split_stack",
        lambda: split_stack.SplitStack(SEED_N, SEED_B, SEED_D).eval(),
        lambda: split_stack.example_inputs(SEED_N, SEED_B, SEED_D),
        ("input_data",),
        _tags("seed", "split", "stack", "layer_norm", "tanh", "horizontal"),
    ),
    # The seed with one LayerNorm per feature: batched, their weights are per slice ([N, 1, D]).
    ModuleSpec(
        "per_feature_split",
        lambda: per_feature_split.PerFeatureSplitStack(PER_FEATURE_N, SEED_B, SEED_D).eval(),
        lambda: per_feature_split.example_inputs(PER_FEATURE_N, SEED_B, SEED_D),
        ("input_data",),
        _tags("per_feature", "split", "stack", "layer_norm", "tanh", "horizontal"),
    ),
    ModuleSpec(
        "per_feature_split_linear",
        lambda: per_feature_split.PerFeatureSplitStack(PER_FEATURE_N, SEED_B, SEED_D, hidden=4).eval(),
        lambda: per_feature_split.example_inputs(PER_FEATURE_N, SEED_B, SEED_D),
        ("input_data",),
        _tags("per_feature", "split", "stack", "layer_norm", "tanh", "horizontal", "matmul"),
    ),
    ModuleSpec(
        "split_cat_uneven",
        _module(0, zoo_modules.SplitCat),
        _floats(4, 32),
        ("x",),
        _tags("split", "concat", "layer_norm", "gelu"),
    ),
    ModuleSpec(
        "chunk_stack",
        _module(0, zoo_modules.ChunkStack),
        _floats(4, 32),
        ("x",),
        _tags("split", "stack", "layer_norm", "tanh", "horizontal"),
    ),
    ModuleSpec(
        "embedding_pool",
        _module(0, zoo_modules.EmbeddingPool),
        _ids,
        ("ids",),
        _tags("embedding", "gather", "int64_input"),
    ),
    # DLRM: a bottom MLP, eight nn.EmbeddingBag features (exported as Loops to ONNX), dot interaction.
    ModuleSpec(
        "dlrm",
        lambda: embeddings.Dlrm(n=DLRM_N, d=8).eval(),
        lambda: embeddings.dlrm_inputs(DLRM_N, batch=4),
        ("dense", *(f"sparse_{i}" for i in range(DLRM_N))),
        _tags("recsys", "embedding_bag", "embedding", "horizontal", "loop", "int64_input"),
    ),
    ModuleSpec(
        "buffers", _module(0, zoo_modules.Buffers), _floats(4, 8), ("x",), _tags("buffers", "layer_norm")
    ),
    # torch.cond becomes an ONNX If through dynamo; TorchScript cannot trace it.
    ModuleSpec(
        "cond",
        _module(0, zoo_modules.CondBranches),
        _floats(4, 8),
        ("x",),
        _tags("control_flow", "if", "subgraph"),
        frozenset({"dynamo", "torch_export"}),
    ),
    # A scripted loop becomes an ONNX Loop through TorchScript; torch.export cannot take a script module.
    ModuleSpec(
        "repeat_loop",
        _scripted_repeat,
        _repeat_args,
        ("x", "steps"),
        _tags("control_flow", "loop", "subgraph"),
        frozenset({"torchscript"}),
    ),
)


def spec(name: str) -> ModuleSpec:
    return next(s for s in SPECS if s.name == name)
