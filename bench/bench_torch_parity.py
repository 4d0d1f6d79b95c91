"""Export on the CPU, optimize, move to the GPU with ``.cuda()``, run: the path a PyTorch user takes.

Six models, random weights, nothing downloaded: the seed (N=128, B=1024, D=256), a per-feature
recommendation model, and BERT, GPT-2, LLaMA (transformers) and ViT (torchvision) in small configs.
For each: ``torch.export.export`` on the CPU, ``graphopt.optimize`` (numeric check on the CPU), then
``program.module().cuda()`` for the original and the optimized program, and on the GPU:

* outputs of the optimized module against the original's, with graphopt's per-dtype tolerance, in
  fp32 and after ``.to(torch.bfloat16)`` of both modules;
* start-to-finish time (one call, then synchronize; median) of the original eager, the original under
  ``torch.compile``, graphopt eager and graphopt under ``torch.compile`` (both ``fullgraph=True``),
  side by side in one run, with the compile times. Two compiles per model keep the run within minutes.

    PYTHONPATH=$PWD python3 bench/bench_torch_parity.py --out bench/results/torch_parity [--models seed,bert]

Writes ``torch_parity.json`` and ``torch_parity.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import graphopt
from bench.coverage.architectures import LastHiddenState, randomize_norms
from bench.coverage.recsys import FeatureTower
from graphopt.benchmark.rounds import interleaved_us
from graphopt.ir import DType
from graphopt.verification.numeric import resolve_tolerances
from models.split_stack import SplitStack, example_input

HIDDEN, LAYERS, HEADS, FFN, VOCAB, SEQ, BATCH = 256, 2, 4, 1024, 1000, 128, 8


def _tokens() -> tuple[torch.Tensor]:
    return (torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(0)),)


def _hf(config_class: str, model_class: str, input_name: str, with_mask: bool = False, **config):
    import transformers

    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config))
    return LastHiddenState(model, input_name, with_mask)


def seed():
    return SplitStack(128, 1024, 256), (example_input(128, 1024, 256),)


def recsys():
    module = FeatureTower(features=16, vocab=1000, dim=64, dense=16, hidden=256)
    return module, module.example_inputs(4096)


def bert():
    module = _hf(
        "BertConfig", "BertModel", "input_ids", hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=FFN, vocab_size=VOCAB, max_position_embeddings=SEQ,
    )  # fmt: skip
    return module, _tokens()


def gpt2():
    module = _hf(
        "GPT2Config", "GPT2Model", "input_ids", with_mask=True, n_embd=HIDDEN, n_layer=LAYERS,
        n_head=HEADS, n_inner=FFN, vocab_size=VOCAB, n_positions=SEQ, use_cache=False,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return module, _tokens()


def vit():
    from torchvision.models import VisionTransformer

    module = VisionTransformer(
        image_size=224, patch_size=16, num_layers=LAYERS, num_heads=HEADS, hidden_dim=HIDDEN,
        mlp_dim=FFN, num_classes=10,
    )  # fmt: skip
    return module, (torch.randn(BATCH, 3, 224, 224, generator=torch.Generator().manual_seed(0)),)


def llama():
    module = _hf(
        "LlamaConfig", "LlamaModel", "input_ids", hidden_size=HIDDEN, intermediate_size=FFN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS // 2,
        vocab_size=VOCAB, max_position_embeddings=SEQ, use_cache=False,
    )  # fmt: skip
    return module, _tokens()


MODELS = {"seed": seed, "recsys": recsys, "bert": bert, "gpt2": gpt2, "vit": vit, "llama": llama}


def _first(output) -> torch.Tensor:
    while isinstance(output, tuple | list):
        output = output[0]
    return output


def _compare(got, want, dtype: torch.dtype) -> dict:
    tolerance = resolve_tolerances(None)[DType.from_torch(dtype)]
    got, want = _first(got).float(), _first(want).float()
    error = (got - want).abs()
    bound = tolerance.atol + tolerance.rtol * want.abs()
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "max_abs_err": float(error.max()),
        "rtol": tolerance.rtol,
        "atol": tolerance.atol,
        "ok": bool(torch.isfinite(got).all() and (error <= bound).all()),
    }


def _compiled(module, inputs) -> tuple[object, float]:
    start = time.perf_counter()
    compiled = torch.compile(module, fullgraph=True)
    with torch.no_grad():
        compiled(*inputs)
    torch.cuda.synchronize()
    return compiled, round(time.perf_counter() - start, 1)


def _no_grad(call):
    def run():
        with torch.no_grad():
            return call()

    return run


def one(name: str, compile_models: bool) -> dict:
    torch.manual_seed(0)
    module, inputs = MODELS[name]()
    randomize_norms(module.eval())
    row: dict = {"model": name}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        program = torch.export.export(module, inputs)
        row["export_s"] = round(time.perf_counter() - start, 1)
        start = time.perf_counter()
        optimized, report = graphopt.optimize(program)
        row["optimize_s"] = round(time.perf_counter() - start, 1)
    fused = {op: n for op, n in report.ops_after.items() if op.startswith("graphopt")}
    row.update(cpu_check=report.verification["ok"], fused_ops=fused, notes=report.notes)
    row["parameters"] = [sum(p.numel() for p in program.parameters())]
    row["parameters"].append(sum(p.numel() for p in optimized.parameters()))

    gpu_inputs = tuple(t.cuda() for t in inputs)
    # .cuda() on each program's module is what failed before; a program whose graph fixed a device
    # (torch.export writes arange(..., device=cpu) as it was traced) runs after torch's own pass instead
    original, row["original_moved"] = _on_gpu(program, gpu_inputs, "the original program")
    candidate, row["graphopt_moved"] = _on_gpu(optimized, gpu_inputs, "graphopt's program")
    with torch.no_grad():
        want = original(*gpu_inputs)
        row["fp32"] = _compare(candidate(*gpu_inputs), want, torch.float32)
    # Eager as a module is called by default (autograd recording: its parameters require gradients)
    # and under no_grad, as inference code calls it.
    calls = {
        "eager": lambda: original(*gpu_inputs),
        "graphopt_eager": lambda: candidate(*gpu_inputs),
        "eager_no_grad": _no_grad(lambda: original(*gpu_inputs)),
        "graphopt_eager_no_grad": _no_grad(lambda: candidate(*gpu_inputs)),
    }
    errors = row["errors"] = {}
    if compile_models:
        for key, who, target in (
            ("compile", "compile_s", original),
            ("graphopt_compile", "graphopt_compile_s", candidate),
        ):
            try:
                compiled, row[who] = _compiled(target, gpu_inputs)
            except Exception as error:  # a column that cannot run is a result, not the row's end
                errors[key] = _line(error)
                row.setdefault("tracebacks", {})[key] = traceback.format_exc().splitlines()[-30:]
                print("\n".join(row["tracebacks"][key]), flush=True)
                continue
            if key == "graphopt_compile":
                with torch.no_grad():
                    row["graphopt_compile_fp32"] = _compare(compiled(*gpu_inputs), want, torch.float32)
            calls[key] = _no_grad(lambda c=compiled: c(*gpu_inputs))
    timings = interleaved_us(
        list(calls.values()), rounds=9, block=10, warmup=5, synchronize=torch.cuda.synchronize
    )
    row["s2f_us"] = {k: round(t.median_us, 1) for k, t in zip(calls, timings, strict=True)}
    row["noise"] = {k: round(t.noise, 3) for k, t in zip(calls, timings, strict=True)}
    with torch.no_grad():
        # .to(dtype) moves every floating parameter and buffer, the optimized program's included
        half = tuple(t.bfloat16() if t.is_floating_point() else t for t in gpu_inputs)
        original.to(torch.bfloat16)
        candidate.to(torch.bfloat16)
        try:
            want = original(*half)
        except Exception as error:  # a program that fixed fp32 in its graph (a mask's dtype, say)
            row["bf16"] = {"skipped": f"the original does not run in bf16: {_line(error)}"}
            return row
        try:
            row["bf16"] = _compare(candidate(*half), want, torch.bfloat16)
        except Exception as error:
            row["bf16"] = {"ok": False, "error": _line(error)}
    return row


def _on_gpu(program, inputs, who: str) -> tuple[torch.nn.Module, str]:
    """``program``'s module on the GPU, moved by ``.cuda()`` or else by torch's own pass, and how; raises
    naming ``who`` (the original or graphopt's program) and both failures where neither runs."""
    module = program.module().cuda()
    try:
        with torch.no_grad():
            module(*inputs)
        return module, ".cuda()"
    except Exception as error:
        from torch.export.passes import move_to_device_pass

        first = _line(error)
    try:
        moved = move_to_device_pass(program, "cuda").module()
        with torch.no_grad():
            moved(*inputs)
    except Exception as error:
        raise RuntimeError(
            f"{who} does not run on the GPU: .cuda() failed ({first}); "
            f"move_to_device_pass failed ({_line(error)})"
        ) from error
    return moved, f"move_to_device_pass (.cuda() failed: {first})"


def _line(error: Exception) -> str:
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200] if str(error).strip() else ''}"


def _err(check: dict) -> str:
    if "skipped" in check:
        return "skipped"
    if "error" in check:
        return f"error ({check['error']})"
    return f"{check['max_abs_err']:.2e} ({check['ok']})"


def _us(row: dict, key: str) -> str:
    if key in row.get("errors", {}):
        return f"error: {row['errors'][key]}"
    if key not in row["s2f_us"]:
        return "–"
    return f"{row['s2f_us'][key]} ±{row['noise'][key] * 100:.0f}%"


COLUMNS = (
    ("eager", "eager (grad mode)"), ("graphopt_eager", "graphopt eager (grad mode)"),
    ("eager_no_grad", "eager, no_grad"), ("graphopt_eager_no_grad", "graphopt eager, no_grad"),
    ("compile", "torch.compile"), ("graphopt_compile", "graphopt + torch.compile"),
)  # fmt: skip


def markdown(rows: list[dict], device: str) -> str:
    lines = [
        f"# CPU export → graphopt → `.cuda()` ({device}, {datetime.date.today()})",
        "",
        "Start-to-finish µs (one call, then synchronize; median of 9 interleaved rounds of 10 calls, ± half",
        "the interquartile range of the round medians). Grad mode: the module called as is (its parameters",
        "require gradients, so autograd records); no_grad: as inference code calls it. torch.compile with",
        "fullgraph=True, called under no_grad.",
        "",
        "| model | " + " | ".join(title for _, title in COLUMNS) + " | fused ops | fp32 max err (ok) | "
        "bf16 max err (ok) | compile s (orig / graphopt) |",
        "|---|" + "---|" * (len(COLUMNS) + 4),
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['model']} | error: {row['error']} |")
            continue
        fused = ", ".join(f"{op.split('.')[-1]} × {n}" for op, n in row["fused_ops"].items()) or "none"
        lines.append(
            f"| {row['model']} | " + " | ".join(_us(row, key) for key, _ in COLUMNS) + f" | {fused} | "
            f"{_err(row['fp32'])} | {_err(row['bf16'])} | "
            f"{row.get('compile_s', '–')} / {row.get('graphopt_compile_s', '–')} |"
        )
    for row in rows:
        for who in ("original", "graphopt"):
            how = row.get(f"{who}_moved", ".cuda()")
            if how != ".cuda()":
                lines.append(f"\n{row['model']}, {who}: moved with {how}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/torch_parity"))
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile columns")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s) {', '.join(unknown)}; expected some of {', '.join(MODELS)}", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name()
    rows = []
    for name in names:
        start = time.perf_counter()
        try:
            row = one(name, not args.no_compile)
        except Exception as error:  # one model's failure is a result: record it, go on with the others
            traceback.print_exc()
            # (the traceback's tail says which step failed: the table keeps only the message's first line)
            tail = traceback.format_exc().splitlines()[-15:]
            row = {"model": name, "error": _line(error), "traceback": tail}
        row["total_s"] = round(time.perf_counter() - start, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
        torch._dynamo.reset()
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"device": device, "torch": torch.__version__, "date": str(datetime.date.today())}
    (args.out / "torch_parity.json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    (args.out / "torch_parity.md").write_text(markdown(rows, device))
    print(markdown(rows, device))
    return 0 if all("error" not in r and r["fp32"]["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
