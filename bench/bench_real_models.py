"""Real architectures end to end, original and optimized, in every runtime (GPU machine).

Random-init models (4 layers, hidden 768, batch 8 × 128 tokens, LLaMA-style hidden 1024): GPT-2 (dynamo
and TorchScript ONNX exports), BERT, ViT, LLaMA, T5 encoder, Whisper encoder, a diffusers UNet2D and a
diffusers VAE (AutoencoderKL, encode then decode), both also at sizes whose group norms have channels
of 4096 and 16384 elements (``unet2d_latent64``, ``vae_image128``), diffusers' DiT and PixArt
transformers (adaptive layer norms; the diffusers rows are skipped with the reason where diffusers is
missing), the seed at N=128 and a per-feature recommendation model, in fp32 and fp16, and bf16 in PyTorch only
(`--dtypes bf16`: ONNX Runtime's CUDA EP lacks many bf16 kernels). Rows: ORT CUDA EP original /
graphopt (with and without a CUDA graph) / ORT's transformer optimizer / both orders; eager PyTorch,
torch.compile, graphopt through PyTorch. Writes real_models.json, real_models.md and real_models.png
to --out.

    python3 bench/bench_real_models.py --out OUT [--models gpt2,bert] [--dtypes fp32] [--no-compile]
        [--rounds 9] [--block 10]

All rows of one model are timed together in interleaved rounds, each with a noise figure (see
graphopt/benchmark/rounds.py), so "graphopt is slower" can be told from noise.

Import torch before onnxruntime on the GPU machine (this script does). ``--device cpu --tiny`` runs a
small configuration on a CPU, to check the script itself.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import logging
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch  # (before onnxruntime: its CUDA libraries must be loaded first)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from graphopt.benchmark.any_model import _quiet, run_rows, variants  # noqa: E402
from graphopt.frontends.torch_arrays import to_numpy  # noqa: E402

log = logging.getLogger("bench_real_models")

LAYERS, HIDDEN, HEADS, BATCH, TOKENS, VOCAB = 4, 768, 12, 8, 128, 32000


@dataclass
class Size:
    layers: int
    hidden: int
    heads: int
    batch: int
    tokens: int
    vocab: int


FULL = Size(LAYERS, HIDDEN, HEADS, BATCH, TOKENS, VOCAB)
TINY = Size(2, 64, 4, 2, 16, 512)


def _hf(config_class, model_class, input_name, with_mask=False, **config):
    import transformers

    from bench.coverage.architectures import LastHiddenState

    config = getattr(transformers, config_class)(**config)
    config._attn_implementation = "eager"
    return LastHiddenState(getattr(transformers, model_class)(config), input_name, with_mask)


def _tokens(s: Size):
    return (torch.randint(0, s.vocab, (s.batch, s.tokens), generator=torch.Generator().manual_seed(0)),)


def gpt2(s):
    module = _hf(
        "GPT2Config", "GPT2Model", "input_ids", with_mask=True, n_embd=s.hidden, n_layer=s.layers,
        n_head=s.heads, vocab_size=s.vocab, n_positions=max(1024, s.tokens), use_cache=False,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return module, _tokens(s), "gpt2"


def bert(s):
    module = _hf(
        "BertConfig", "BertModel", "input_ids", hidden_size=s.hidden, num_hidden_layers=s.layers,
        num_attention_heads=s.heads, intermediate_size=4 * s.hidden, vocab_size=s.vocab,
    )  # fmt: skip
    return module, _tokens(s), "bert"


def vit(s):
    size, patch = (224, 16) if s is FULL else (32, 8)
    module = _hf(
        "ViTConfig", "ViTModel", "pixel_values", hidden_size=s.hidden, num_hidden_layers=s.layers,
        num_attention_heads=s.heads, intermediate_size=4 * s.hidden, image_size=size, patch_size=patch,
    )  # fmt: skip
    images = torch.randn(s.batch, 3, size, size, generator=torch.Generator().manual_seed(0))
    return module, (images,), "vit"


def llama(s):
    hidden = 1024 if s is FULL else s.hidden
    module = _hf(
        "LlamaConfig", "LlamaModel", "input_ids", hidden_size=hidden, intermediate_size=int(2.6875 * hidden),
        num_hidden_layers=s.layers, num_attention_heads=s.heads if s is not FULL else 16,
        num_key_value_heads=s.heads if s is not FULL else 16, vocab_size=s.vocab,
        max_position_embeddings=max(2048, s.tokens), use_cache=False,
    )  # fmt: skip
    return module, _tokens(s), "gpt2"


def t5_encoder(s):
    module = _hf(
        "T5Config", "T5EncoderModel", "input_ids", d_model=s.hidden, d_ff=4 * s.hidden,
        d_kv=s.hidden // s.heads, num_layers=s.layers, num_heads=s.heads, vocab_size=s.vocab, use_cache=False,
    )  # fmt: skip
    return module, _tokens(s), "t5"


class _WhisperEncoder(torch.nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, features):
        return self.encoder(features).last_hidden_state


def whisper_encoder(s):
    import transformers
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    config = transformers.WhisperConfig(
        d_model=s.hidden, encoder_layers=s.layers, encoder_attention_heads=s.heads,
        encoder_ffn_dim=4 * s.hidden, num_mel_bins=80, max_source_positions=s.tokens,
    )  # fmt: skip
    config._attn_implementation = "eager"
    features = torch.randn(s.batch, 80, 2 * s.tokens, generator=torch.Generator().manual_seed(0))
    return _WhisperEncoder(WhisperEncoder(config)), (features,), "bert"


class _UNet(torch.nn.Module):
    def __init__(self, unet):
        super().__init__()
        self.unet = unet

    def forward(self, sample, timestep):
        return self.unet(sample, timestep).sample


def unet2d(s, channels=(128, 256), size=32, in_channels=3):
    from diffusers import UNet2DModel  # (skipped with the reason where diffusers is missing)

    channels = channels if s is FULL else (32, 64)
    unet = UNet2DModel(
        sample_size=size, in_channels=in_channels, out_channels=in_channels, layers_per_block=1,
        block_out_channels=channels, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=32,
    )  # fmt: skip
    sample = torch.randn(s.batch, in_channels, size, size, generator=torch.Generator().manual_seed(0))
    return _UNet(unet), (sample, torch.tensor([10])), None


def unet2d_latent64(s):
    """Stable Diffusion 1.5's first two widths (320, 640) on its 64x64 latent: group norms over channels
    of 4096 elements, 256 rows at batch 8 (classifier-free guidance at batch 4)."""
    return unet2d(s, channels=(320, 640), size=64 if s is FULL else 16, in_channels=4)


class _VAE(torch.nn.Module):
    """Encode then decode, deterministic: the latent is the posterior's mode (its mean), never a sample."""

    def __init__(self, vae):
        super().__init__()
        self.vae = vae

    def forward(self, sample):
        return self.vae.decode(self.vae.encode(sample).latent_dist.mode()).sample


def vae(s, full_size=64):
    from diffusers import AutoencoderKL  # (skipped with the reason where diffusers is missing)

    channels, size = ((128, 256), full_size) if s is FULL else ((32, 64), 16)
    autoencoder = AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=channels, layers_per_block=1,
        latent_channels=4, norm_num_groups=32, sample_size=size,
    )  # fmt: skip
    sample = torch.randn(s.batch, 3, size, size, generator=torch.Generator().manual_seed(0))
    return _VAE(autoencoder), (sample,), None


def vae_image128(s):
    """The VAE on 128x128 images: group norms over channels of 16384 elements, 256 rows at batch 8."""
    return vae(s, full_size=128)


def _diffusion_transformer(s) -> dict:
    """DiT-S/2's width (6 heads of 64) and latent (32x32x4, 2x2 patches: 256 tokens), 4 layers."""
    heads, head_dim, size = (6, 64, 32) if s is FULL else (2, 32, 8)
    return dict(
        num_attention_heads=heads, attention_head_dim=head_dim, in_channels=4, out_channels=4,
        num_layers=s.layers, sample_size=size, patch_size=2,
    )  # fmt: skip


def _timesteps(s):
    return torch.randint(0, 1000, (s.batch,), generator=torch.Generator().manual_seed(1))


def dit(s):
    """Class-conditional DiT: every LayerNorm modulated per sample (adaptive layer norm, zero-init)."""
    from diffusers import DiTTransformer2DModel  # (skipped with the reason where diffusers is missing)

    from bench.coverage.diffusers_models import ClassDenoise

    config = _diffusion_transformer(s)
    transformer = DiTTransformer2DModel(num_embeds_ada_norm=1000, **config)
    sample = torch.randn(s.batch, 4, config["sample_size"], config["sample_size"])
    labels = torch.randint(0, 1000, (s.batch,), generator=torch.Generator().manual_seed(2))
    return ClassDenoise(transformer), (sample, _timesteps(s), labels), None


def pixart(s):
    """PixArt-alpha's transformer: one timestep embedding modulates every block's norms, cross-attention
    to text states."""
    from diffusers import PixArtTransformer2DModel

    from bench.coverage.diffusers_models import TextDenoise

    config = _diffusion_transformer(s)
    width = config["num_attention_heads"] * config["attention_head_dim"]
    transformer = PixArtTransformer2DModel(
        cross_attention_dim=width, caption_channels=2 * width, use_additional_conditions=False, **config
    )
    sample = torch.randn(s.batch, 4, config["sample_size"], config["sample_size"])
    context = torch.randn(s.batch, 32, 2 * width, generator=torch.Generator().manual_seed(3))
    return TextDenoise(transformer), (sample, _timesteps(s).float(), context), None


def seed(s):
    from models.split_stack import SplitStack

    n, b, d = (128, 512, 256) if s is FULL else (8, 16, 32)
    data = torch.randn(n * b * d, generator=torch.Generator().manual_seed(0))
    return SplitStack(n=n, b=b, d=d), (data,), None


def per_feature_n128(s):
    """The seed written with one LayerNorm per feature (each its own scale and bias), same size."""
    from models.per_feature_split import PerFeatureSplitStack

    n, b, d = (128, 512, 256) if s is FULL else (8, 16, 32)
    data = torch.randn(n * b * d, generator=torch.Generator().manual_seed(0))
    return PerFeatureSplitStack(n=n, b=b, d=d), (data,), None


def per_feature(s):
    from bench.coverage.recsys import FeatureTower

    module = FeatureTower(features=64, vocab=1000, dim=64, hidden=256) if s is FULL else FeatureTower()
    return module, module.example_inputs(s.batch * s.tokens if s is FULL else 8), None


MODELS = {
    "gpt2": gpt2,  # both ONNX exporters
    "bert": bert,
    "vit": vit,
    "llama": llama,
    "t5_encoder": t5_encoder,
    "whisper_encoder": whisper_encoder,
    "unet2d": unet2d,
    "unet2d_latent64": unet2d_latent64,
    "vae": vae,
    "vae_image128": vae_image128,
    "dit": dit,
    "pixart": pixart,
    "seed_n128": seed,
    "per_feature_n128": per_feature_n128,
    "per_feature": per_feature,
}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# (bf16 is timed in PyTorch only: ONNX Runtime's CUDA EP lacks many bf16 kernels)
PYTORCH_ONLY = {"bf16"}
# Models whose ONNX rows come from the TorchScript exporter, and why. PixArt ends with torch's no-op
# squeeze(1) of a dimension of 32, which the dynamo exporter writes as a Squeeze that ONNX Runtime refuses.
ONNX_EXPORTER = {"pixart": "torchscript"}


def _export(module, args, exporter: str):
    from models.onnx_export import export_dynamo, export_torchscript

    with _quiet():
        if exporter == "dynamo":
            return export_dynamo(module, args)
        return export_torchscript(
            module, args, input_names=[f"input_{i}" for i in range(len(args))], opset=17
        )


def _export_program(module, args, device: str):
    """The program exported on ``device`` itself, from a copy of the module: tensors the model makes
    as it runs (``arange``, masks, constants) then carry that device, so torch.compile of the original
    and of graphopt's output trace the graph the GPU runs (a CPU export moved afterwards kept CPU
    tensors that torch.compile's fake tensors refused)."""
    import copy

    on_device = copy.deepcopy(module).to(device)
    with _quiet():
        return torch.export.export(on_device, tuple(a.to(device) for a in args))


def bench_one(name: str, dtype: str, exporter: str, size: Size, device: str, compile_modes, timing):
    torch.manual_seed(0)
    started = time.perf_counter()
    try:
        module, args, model_type = MODELS[name](size)
    except ImportError as error:
        return {"model": name, "dtype": dtype, "exporter": exporter, "skipped": f"{error}"}
    module = module.eval()
    torch_dtype = DTYPES[dtype]
    if torch_dtype != torch.float32:
        module = module.to(torch_dtype)
        args = tuple(a.to(torch_dtype) if a.is_floating_point() else a for a in args)
    record = {"model": name, "dtype": dtype, "exporter": exporter, "model_type": model_type}
    program = None
    if exporter == "dynamo":  # (the PyTorch rows once per model: the TorchScript record is ONNX only)
        try:
            program = _export_program(module, args, device)
        except Exception as error:  # (then the CPU export, moved to the device by the rows, as before)
            record["torch_export_note"] = f"exported on the CPU: on {device}, {_line(error)}"
            log.warning("%s", record["torch_export_note"])
            program = _export_program(module, args, "cpu")
    onnx_model = None
    if dtype in PYTORCH_ONLY:
        record["onnx_export_error"] = f"skipped: {dtype} is timed in PyTorch only"
    else:
        try:
            onnx_model = _export(module, args, ONNX_EXPORTER.get(name, exporter))
            if name in ONNX_EXPORTER:
                record["onnx_exporter"] = ONNX_EXPORTER[name]
        except Exception as error:
            record["onnx_export_error"] = _line(error)
    # Inputs by the ONNX model's names and by the program's (ONNX Runtime and PyTorch each take theirs).
    feeds = {}
    if onnx_model is not None:
        names = [i.name for i in onnx_model.graph.input]
        feeds.update({n: to_numpy(a) for n, a in zip(names, args, strict=False)})
    if program is not None:
        from torch.export.graph_signature import InputKind

        names = [s.arg.name for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
        feeds.update({n: to_numpy(a) for n, a in zip(names, args, strict=True)})
    rows = variants(
        onnx_model,
        program,
        feeds,
        device,
        compile_modes=compile_modes,
        ort_model_type=model_type,
        ort_options={"num_heads": 0, "hidden_size": 0},
    )
    record["rows"] = [r.__dict__ for r in run_rows(rows, device, **timing)]
    if onnx_model is not None:
        record["fusions"] = fusions(onnx_model, model_type, device == "cuda")
    record["seconds"] = round(time.perf_counter() - started, 1)
    return record


def fusions(onnx_model, model_type, use_gpu: bool) -> dict:
    """The ops each optimizer adds to the original (ORT's fusions, graphopt's), counted, so a row where
    graphopt is slower than ORT's optimizer says which of ORT's fusions graphopt lacks."""
    import graphopt
    from graphopt.benchmark.any_model import ort_transformer_optimized

    def added(model) -> dict[str, int]:
        before = Counter(f"{n.domain or 'ai.onnx'}::{n.op_type}" for n in onnx_model.graph.node)
        after = Counter(f"{n.domain or 'ai.onnx'}::{n.op_type}" for n in model.graph.node)
        return dict(sorted((after - before).items()))

    optimizers = {"graphopt": lambda: graphopt.optimize(onnx_model, verify=False).model}
    if model_type is not None:
        options = {"num_heads": 0, "hidden_size": 0}
        optimizers["ort_transformer_optimizer"] = lambda: ort_transformer_optimized(
            onnx_model, model_type, use_gpu, options
        )
    found = {}
    for name, optimize in optimizers.items():
        try:
            found[name] = added(optimize())
        except Exception as error:  # (a failing optimizer is in the rows already; say which one it was)
            found[f"{name} error"] = _line(error)
    return found


def markdown(result) -> str:
    lines = [f"# Real models, {result['device']}, {result['date']}", ""]
    lines += [
        f"- {key}: {result[key]}" for key in ("device", "date", "torch", "onnxruntime") if key in result
    ]
    lines += [f"- command: `{c}`" for c in result.get("commands", [])]
    timing = result.get("timing", {})
    lines += [
        "",
        "Start-to-finish: one call and a synchronize. All rows of one model, dtype and export are timed "
        f"together in {timing.get('rounds', '?')} interleaved rounds of {timing.get('block', '?')} calls per "
        "row (the order rotating each round); a row's time is the median over rounds of its round "
        "medians, and its noise ± is half the interquartile range of those round medians, relative to "
        "the median. Two rows whose times differ by less than their noise are equally fast. ONNX Runtime "
        "on CUDA reads and writes device-resident buffers through I/O binding (no host copy per call). "
        "GPU µs: kernel time from the profiler. The PyTorch rows (torch.compile included) use a program "
        "exported on the device itself, and graphopt's output of it moved to the device as is.",
        "",
        _noise_summary(result["records"]),
        "",
        "| model | dtype | export | row | start-to-finish µs | noise ± | GPU µs | vs ORT original "
        "| max abs err |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for record in result["records"]:
        if "skipped" in record:
            lines.append(f"| {record['model']} | {record['dtype']} | {record['exporter']} | skipped: "
                         f"{record['skipped']} | | | | | |")  # fmt: skip
            continue
        base = next((r["start_to_finish_us"] for r in record["rows"] if r["start_to_finish_us"]), None)
        for row in record["rows"]:
            s2f, gpu, error = row["start_to_finish_us"], row["gpu_us"], row["max_abs_error"]
            noise = row.get("noise")
            cells = [
                record["model"], record["dtype"], _export_label(record, row["variant"]), row["variant"],
                f"{s2f:,.1f}" if s2f else _short(row["error"]),
                f"{100 * noise:.1f}%" if noise is not None else "",
                f"{gpu:,.1f}" if gpu else "", f"{base / s2f:.2f}×" if base and s2f else "",
                f"{error:.1e}" if error is not None else "",
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *verdicts(result["records"])]
    lines += ["", "Ops each optimizer adds to the original (fusions), per model:", ""]
    for record in result["records"]:
        for optimizer, added in record.get("fusions", {}).items():
            lines.append(f"- {record['model']} {record['dtype']} {record['exporter']}, {optimizer}: {added}")
    return "\n".join(lines) + "\n"


def _export_label(record, variant: str) -> str:
    """The export a row ran: the record's, but for a model whose ONNX rows another exporter wrote."""
    if "onnx_exporter" in record and "ORT" in variant:
        return f"{record['onnx_exporter']} (ONNX)"
    return record["exporter"]


def _line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200] if text else ''}"


def _short(error: str | None) -> str:
    text = (error or "").replace("|", "/")
    return text if len(text) <= 160 else text[:157] + "..."


def _noise_summary(records) -> str:
    noises = sorted(r["noise"] for rec in records for r in rec.get("rows", []) if r.get("noise") is not None)
    if not noises:
        return "Noise: no row was timed."
    median = noises[len(noises) // 2]
    return (
        f"Noise measured over {len(noises)} timed rows: median ±{100 * median:.1f}%, "
        f"largest ±{100 * noises[-1]:.1f}%."
    )


# Each graphopt row and the row it is to be compared with (the same runtime without graphopt).
BASELINES = {
    "graphopt → ORT CUDA EP": "ORT CUDA EP",
    "graphopt → ORT CUDA EP + CUDA graph": "ORT CUDA EP + CUDA graph",
    "graphopt → ORT CPU EP": "ORT CPU EP",
    "ORT optimizer → graphopt → ORT CUDA EP": "ORT transformer optimizer → ORT CUDA EP",
    "ORT optimizer → graphopt → ORT CPU EP": "ORT transformer optimizer → ORT CPU EP",
    "graphopt → PyTorch": "eager PyTorch",
    "graphopt → PyTorch (no_grad)": "eager PyTorch (no_grad)",
    "graphopt → PyTorch (direct)": "eager PyTorch (direct)",
    "graphopt → PyTorch + CUDA graph": "eager PyTorch + CUDA graph",
}


def compared(record) -> list[tuple[str, str, float, float]]:
    """(graphopt's row, the original's row of the same runtime, time ratio, noise margin) of a record:
    the pairs in BASELINES and each torch.compile mode, where both rows ran. The margin is the two
    rows' noise added together: a ratio within 1 ± margin is no difference."""
    rows = {r["variant"]: r for r in record.get("rows", [])}
    pairs = dict(BASELINES)
    pairs.update({n: n.replace("graphopt → ", "") for n in rows if n.startswith("graphopt → torch.compile")})
    found = []
    for mine, theirs in pairs.items():
        a, b = rows.get(mine), rows.get(theirs)
        if a and b and a["start_to_finish_us"] and b["start_to_finish_us"]:
            margin = (a.get("noise") or 0) + (b.get("noise") or 0)
            found.append((mine, theirs, a["start_to_finish_us"] / b["start_to_finish_us"], margin))
    return found


def verdicts(records) -> list[str]:
    """graphopt against the same runtime without it, per record: slower only where the gap exceeds
    the two rows' noise added together."""
    lines = [
        "graphopt against the same runtime without it (slower counts only beyond the two rows' noise "
        "added together):",
        "",
    ]
    for record in records:
        for mine, theirs, ratio, margin in compared(record):
            verdict = "slower" if ratio > 1 + margin else "faster" if ratio < 1 - margin else "same"
            lines.append(
                f"- {record['model']} {record['dtype']} {record['exporter']}: {mine} / {theirs} = "
                f"{ratio:.2f} (noise ±{100 * margin:.1f}%): {verdict}"
            )
    return lines


def chart(result, path: Path) -> None:
    """graphopt's speed-up over the same runtime without it (the original's time over graphopt's), one
    group of bars per model, dtype and export, one bar per runtime; each bar's whisker is the two
    rows' noise, so a bar whose whisker crosses 1 is no difference."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    records = [r for r in result["records"] if compared(r)]
    if not records:
        return
    series = list(dict.fromkeys(theirs for r in records for _, theirs, _, _ in compared(r)))
    figure, axis = plt.subplots(figsize=(max(9, 1.5 * len(records)), 6))
    width = 0.8 / len(series)
    colors = plt.get_cmap("tab20").colors
    for i, name in enumerate(series):
        xs, heights, low, high = [], [], [], []
        for k, record in enumerate(records):
            pair = next((p for p in compared(record) if p[1] == name), None)
            if pair is None:
                continue
            speed_up = 1 / pair[2]
            xs.append(k + i * width)
            heights.append(speed_up)
            low.append(speed_up - 1 / (pair[2] * (1 + pair[3])))
            high.append(1 / (pair[2] * max(1 - pair[3], 1e-3)) - speed_up)
        axis.bar(xs, heights, width, yerr=[low, high], capsize=1.5, label=name, color=colors[i % len(colors)],
                 error_kw={"linewidth": 0.6})  # fmt: skip
    axis.set_xticks(
        [k + 0.4 - width / 2 for k in range(len(records))],
        [f"{r['model']}\n{r['dtype']} {r['exporter']}" for r in records],
        fontsize=7,
    )
    axis.axhline(1.0, color="k", linewidth=0.8)
    axis.set_yscale("log")
    axis.set_ylabel("graphopt's speed-up over the same runtime\n(start to finish; whisker: noise)")
    axis.set_title(
        f"graphopt against each runtime without it, {result['device']}, {result['date']}", fontsize=9
    )
    axis.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def redraw(record_path: Path) -> None:
    """The markdown and chart of a recorded run again, from its JSON (after a change to either)."""
    result = json.loads(record_path.read_text())
    record_path.with_suffix(".md").write_text(markdown(result))
    chart(result, record_path.with_suffix(".png"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/real_models"))
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--dtypes", default="fp32,fp16")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--tiny", action="store_true", help="a small configuration (to check the script)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    parser.add_argument("--compile-modes", default="default", help="e.g. default,max-autotune")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved timing rounds")
    parser.add_argument("--block", type=int, default=10, help="calls per row in each round")
    parser.add_argument(
        "--redraw", type=Path, help="only rewrite the markdown and chart of this recorded JSON"
    )
    args = parser.parse_args(argv)
    if args.redraw:
        redraw(args.redraw)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    size = TINY if args.tiny else FULL
    compile_modes = () if args.no_compile else tuple(args.compile_modes.split(","))
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    import onnxruntime

    result = {
        "device": device_name,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "timing": {"rounds": args.rounds, "block": args.block},
    }
    result["size"] = size.__dict__
    args.out.mkdir(parents=True, exist_ok=True)
    # Runs split over several calls share one record: a model measured again replaces its old entry.
    record_path = args.out / "real_models.json"
    earlier = json.loads(record_path.read_text()) if record_path.exists() else {}
    command = "python3 " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])])
    result["commands"] = [c for c in earlier.get("commands", []) if c != command] + [command]
    result["records"] = earlier.get("records", [])
    timing = {"rounds": args.rounds, "block": args.block}
    for name in args.models.split(","):
        if name not in MODELS:
            print(f"unknown model {name!r}; known: {', '.join(MODELS)}", file=sys.stderr)
            return 2
        for dtype in args.dtypes.split(","):
            both = name == "gpt2" and dtype not in PYTORCH_ONLY  # (TorchScript's record is ONNX only)
            for exporter in ("dynamo", "torchscript") if both else ("dynamo",):
                log.info("== %s %s %s", name, dtype, exporter)
                record = bench_one(name, dtype, exporter, size, args.device, compile_modes, timing)
                record["device"] = device_name
                gc.collect()  # (the record's sessions and programs, before the next one is built)
                if args.device == "cuda":
                    torch.cuda.empty_cache()
                key = (name, dtype, exporter)
                result["records"] = [
                    r for r in result["records"] if (r["model"], r["dtype"], r["exporter"]) != key
                ] + [record]
                record_path.write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "real_models.md").write_text(markdown(result))
    chart(result, args.out / "real_models.png")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
