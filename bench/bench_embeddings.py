"""Embedding-fronted recommendation models on a GPU: N ∈ {8, 32, 128}, B ∈ {512, 4096}, D ∈ {64, 128}.

Model (a) (models/embeddings.py: N tables → LayerNorm → tanh → stack → Linear(D, 1) → ReLU) and, with
``--models dlrm,dlrm_mean,dlrm_weighted``, the DLRM-style model (b) with N ``nn.EmbeddingBag`` features
of BAG ids each (sum, mean, sum with per-sample weights); ``dlrm_jagged,dlrm_jagged_mean,
dlrm_jagged_weighted``: the same with each feature's ids flat and cut into bags of random sizes by
offsets (BAG ids a bag on average, empty bags included). For each size: the original in eager PyTorch, the
hand-batched version (one concatenated table) in eager PyTorch and in ORT's CUDA EP, torch.compile of
the original, ORT's CUDA EP on the original, and graphopt through torch (direct call, CUDA graph) and
through ORT (with graphopt's op library). Start-to-finish µs (GPU µs), the largest difference from
eager, the kernels of graphopt's programs (torch and ONNX), and memory: the bytes of the ONNX models'
weights and of the torch programs' state (original vs optimized: the tables are held once), and the
GPU memory one call allocates beyond it (no call concatenates the tables).

    python bench/bench_embeddings.py --out OUT [--models a,dlrm,dlrm_jagged,...] [--n 8,32,128]
        [--batch 512,4096] [--d 64,128] [--compile default,max-autotune-no-cudagraphs]
        [--norm shared|per-feature] [--quick] [--lookups-only] [--budget-s S]

Writes OUT/embeddings.json and OUT/embeddings.md. The "graphopt ORT" column needs graphopt's ONNX Runtime
library (``GRAPHOPT_ORT_LIBRARY``, as bench/run_gpu.sh builds and sets it). ``--lookups-only`` times the
lookups alone instead: the original's N lookups and stack, the standard-op form
(indices' stack, offset arithmetic, one index_select), graphopt's EmbeddingLookups, against a device
copy of the bytes a lookup must move; it writes OUT/embedding_lookups.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import sys
import time
from pathlib import Path

import onnx
import torch  # before onnxruntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import graphopt
from graphopt.benchmark.ort_cuda import ort_cuda_callable
from graphopt.benchmark.timing import copy_bandwidth_bytes_per_s, gpu_us, start_to_finish_us
from graphopt.fused import register_torch_ops
from graphopt.runtime import cuda_graphed, direct_callable, to_device
from models.embeddings import (
    Dlrm,
    EmbeddingStack,
    HandBatched,
    HandBatchedDlrm,
    dlrm_inputs,
    example_indices,
    jagged_dlrm_inputs,
    vocab_sizes,
)
from models.onnx_export import export_dynamo

SMALLEST_VOCAB = 1000  # tables of 1,000 to 1,000 + 37 (N - 1) rows: 220 MB of fp32 weights at N=128, D=128
BAG = 4  # ids per bag of the DLRM models
DLRM_VARIANTS = {"dlrm": ("sum", False), "dlrm_mean": ("mean", False), "dlrm_weighted": ("sum", True)}
DLRM_VARIANTS |= {f"dlrm_jagged{k[4:]}": v for k, v in DLRM_VARIANTS.items()}  # (bags of different sizes)


def measure(call, reference, iters):
    output = call()
    output = output[0] if isinstance(output, tuple | list) else output
    return {
        "s2f_us": round(start_to_finish_us(call, warmup=5, iters=iters), 1),
        "gpu_us": round(gpu_us(call, iters=5), 1),
        "max_abs_err": float((output.float() - reference).abs().max()),
    }


def attempt(row, label, build, reference, iters):
    """Times ``build()``'s call; a runtime that fails is a result, not the end of the sweep."""
    try:
        row[label] = measure(build(), reference, iters)
    except Exception as error:
        row[label] = {"error": f"{type(error).__name__}: {error}"[:200]}
    torch.cuda.empty_cache()


def onnx_bytes(model) -> int:
    return sum(len(t.raw_data) or t.ByteSize() for t in model.graph.initializer)


def ort_feeds(model, inputs):
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    return dict(zip(names, inputs, strict=True))


def call_memory(call) -> int:
    """Bytes of GPU memory one call allocates beyond what is already held (its outputs and temporaries)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    held = torch.cuda.memory_allocated()
    call()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - held


def state_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def kernels_of(program) -> list[str]:
    """The call targets of a torch program that launch kernels (views move nothing)."""
    views = ("view", "reshape", "unsqueeze", "squeeze", "expand", "alias")
    targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    return [t for t in targets if not any(f".{v}" in t or t.startswith(v) for v in views)]


def host_profile(calls: dict, out: Path) -> None:
    """Where each call's host time goes: torch.profiler's CPU table over 20 calls, appended to
    ``out``/embeddings_host_profile.txt."""
    with out.joinpath("embeddings_host_profile.txt").open("a") as file:
        for label, call in calls.items():
            for _ in range(5):
                call()
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                for _ in range(20):
                    call()
                torch.cuda.synchronize()
            table = prof.key_averages().table(
                sort_by="cpu_time_total", row_limit=15, max_name_column_width=50
            )
            file.write(f"## {label} (20 calls)\n{table}\n")


def runtimes(row, module, inputs, hand, compile_modes, iters, slow_loops=None, profile_to=None):
    """Every runtime on ``module`` (and on ``hand``, its hand-batched form, when given). ``slow_loops``:
    why the ONNX exporters' EmbeddingBag Loops (one iteration per bag, in the original and the
    hand-batched ONNX models) are not timed here, or None to time them."""
    cpu_inputs = tuple(t.cpu() for t in inputs)
    with torch.no_grad():
        reference = module(*inputs).float()
        attempt(row, "eager", lambda: lambda: module(*inputs), reference, iters)
        if hand is not None:
            attempt(row, "hand_batched", lambda: lambda: hand(*inputs), reference, iters)
        for mode in compile_modes:
            torch._dynamo.reset()
            compiled = torch.compile(module, mode=mode)
            attempt(row, f"compile_{mode}", lambda c=compiled: lambda: c(*inputs), reference, iters)

        start = time.perf_counter()
        program = torch.export.export(module.cpu(), cpu_inputs)
        optimized, report = graphopt.optimize(program, verify=False)
        module.cuda()
        row["graphopt_torch_rules"] = report.rule_counts
        row["optimize_s"] = round(time.perf_counter() - start, 1)
        row["graphopt_torch_kernels"] = kernels_of(optimized)
        on_gpu = to_device(optimized, "cuda")
        direct = direct_callable(on_gpu)
        row["memory_bytes"] = {
            "original_state": state_bytes([*module.parameters(), *module.buffers()]),
            "graphopt_state": state_bytes([*on_gpu.state_dict.values(), *on_gpu.constants.values()]),
            "original_call": call_memory(lambda: module(*inputs)),
            "graphopt_call": call_memory(lambda: direct(*inputs)),
        }
        attempt(row, "graphopt_torch", lambda: lambda: direct(*inputs), reference, iters)
        if profile_to is not None:
            calls = {
                f"{row['model']} N={row['N']} B={row['B']} D={row['D']} graphopt torch": lambda: direct(
                    *inputs
                )
            }
            if hand is not None:
                calls[f"{row['model']} N={row['N']} B={row['B']} D={row['D']} hand-batched"] = lambda: hand(
                    *inputs
                )
            host_profile(calls, profile_to)
        attempt(
            row,
            "graphopt_torch_cuda_graph",
            lambda: (lambda g: lambda: g(*inputs))(cuda_graphed(direct, list(inputs), capture_inputs=True)),
            reference,
            iters,
        )
        del program, optimized

    original = export_dynamo(module.cpu(), cpu_inputs)
    module.cuda()
    optimized, report = graphopt.optimize(original, verify=False)
    row["graphopt_onnx_ops"] = [n.op_type for n in optimized.graph.node]
    row["weights_bytes"] = {"original": onnx_bytes(original), "graphopt": onnx_bytes(optimized)}
    for label, model, library in (("ort", original, False), ("graphopt_ort", optimized, True)):
        for graph in (False, True):
            name = f"{label}_cuda_graph" if graph else label
            if slow_loops is not None and label == "ort":
                row[name] = {"error": slow_loops}
                continue
            attempt(
                row,
                name,
                lambda m=model, lib=library, g=graph: ort_cuda_callable(
                    m, ort_feeds(m, inputs), cuda_graph=g, with_library=lib
                ),
                reference,
                iters,
            )
    if all(t.dtype == inputs[0].dtype and t.shape == inputs[0].shape for t in inputs):
        floor = inputs_floor(original, inputs)
        attempt(
            row,
            "ort_inputs_floor",
            lambda: ort_cuda_callable(floor, ort_feeds(floor, inputs), cuda_graph=False, with_library=False),
            torch.stack(inputs).float(),
            iters,
        )
    if hand is not None and slow_loops is not None and isinstance(hand, HandBatchedDlrm):
        row["hand_batched_ort"] = {"error": slow_loops}
    elif hand is not None:
        hand_model = export_dynamo(hand.cpu(), cpu_inputs)
        hand.cuda()
        attempt(
            row,
            "hand_batched_ort",
            lambda: ort_cuda_callable(
                hand_model, ort_feeds(hand_model, inputs), cuda_graph=False, with_library=False
            ),
            reference,
            iters,
        )


def inputs_floor(model, inputs) -> onnx.ModelProto:
    """The least a model of these inputs can do in ONNX Runtime: join them (one Concat kernel, as graphopt's
    model starts). Its start-to-finish time is the run's cost of binding the inputs, which no optimization of
    the model can remove: with 128 inputs it bounds how many times faster any model can get."""
    from onnx import TensorProto, helper

    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    elem = model.graph.input[0].type.tensor_type.elem_type
    shape = list(inputs[0].shape)
    shape_value = helper.make_tensor("shape", TensorProto.INT64, [1 + len(shape)], [len(names), *shape])
    nodes = [
        helper.make_node("Concat", names, ["joined"], axis=0),
        helper.make_node("Reshape", ["joined", "shape"], ["stacked"]),
    ]
    graph = helper.make_graph(
        nodes,
        "inputs_floor",
        [helper.make_tensor_value_info(n, elem, shape) for n in names],
        [helper.make_tensor_value_info("stacked", elem, [len(names), *shape])],
        [shape_value],
    )
    floor = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    floor.ir_version = 9
    return floor


def one(model, n, b, d, args):
    row = {"model": model, "N": n, "B": b, "D": d}
    started, slow_loops = time.perf_counter(), None
    if model == "a":
        module = EmbeddingStack(n, d, shared_norm=args.norm == "shared", smallest_vocab=SMALLEST_VOCAB)
        hand = HandBatched(module).cuda().eval() if args.norm == "shared" else None
        inputs = example_indices(n, b, smallest_vocab=SMALLEST_VOCAB)
        compile_modes = args.compile
    else:
        (mode, weighted), jagged = DLRM_VARIANTS[model], "jagged" in model
        module = Dlrm(n, d, mode=mode, weighted=weighted, smallest_vocab=SMALLEST_VOCAB, jagged=jagged).eval()
        hand = HandBatchedDlrm(module).cuda().eval()
        make = jagged_dlrm_inputs if jagged else dlrm_inputs
        inputs = make(n, b, bag=BAG, weighted=weighted, smallest_vocab=SMALLEST_VOCAB)
        compile_modes = args.compile
        if n * b > args.max_loop_bags:
            slow_loops = f"skipped: {n * b} bags in Loops > --max-loop-bags"
    module = module.cuda().eval()
    inputs = tuple(t.cuda() for t in inputs)
    profile_to = args.out if args.profile else None
    runtimes(row, module, inputs, hand, compile_modes, args.iters, slow_loops, profile_to)
    row["seconds"] = round(time.perf_counter() - started, 1)
    return row


ONNX_VIEWS = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Identity", "Flatten"})
COLUMNS = (
    ("eager", "eager"),
    ("hand_batched", "hand-batched"),
    ("compile_default", "compile"),
    ("compile_max-autotune-no-cudagraphs", "compile max-autotune"),
    ("graphopt_torch", "graphopt torch"),
    ("graphopt_torch_cuda_graph", "graphopt torch+graph"),
    ("ort", "ORT CUDA"),
    ("hand_batched_ort", "hand-batched ORT"),
    ("graphopt_ort", "graphopt ORT"),
    ("ort_cuda_graph", "ORT CUDA+graph"),
    ("graphopt_ort_cuda_graph", "graphopt ORT+graph"),
    ("ort_inputs_floor", "ORT floor (inputs → stack)"),
)


def markdown(record) -> str:
    def cell(r, key):
        v = r.get(key)
        if v is None:
            return "-"
        return v.get("error", "-")[:40] if "s2f_us" not in v else f"{v['s2f_us']} ({v['gpu_us']})"

    header = (
        "| model | N | B | D | " + " | ".join(title for _, title in COLUMNS)
        + " | graphopt kernels torch / ONNX | weights MB orig → opt | state MB orig → opt"
        + " | call MB orig → opt |"
    )  # fmt: skip
    lines = [
        f"# Embedding models ({record['device']}, {record['date']}): start-to-finish µs (GPU µs)",
        "",
        header,
        "|" + "---|" * (len(COLUMNS) + 8),
    ]
    for r in record["rows"]:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['N']} | {r['B']} | {r['D']} | {r['error'][:80]} |")
            continue
        weights, memory = r.get("weights_bytes", {}), r.get("memory_bytes", {})

        def mb(record, a, b):
            return f"{record.get(a, 0) / 1e6:.1f} → {record.get(b, 0) / 1e6:.1f}"

        onnx_kernels = [op for op in r.get("graphopt_onnx_ops", []) if op not in ONNX_VIEWS]
        kernels = f"{len(r.get('graphopt_torch_kernels', []))} / {len(onnx_kernels)}"
        sizes = " | ".join(
            (mb(weights, "original", "graphopt"), mb(memory, "original_state", "graphopt_state"),
             mb(memory, "original_call", "graphopt_call"))
        )  # fmt: skip
        cells = " | ".join(cell(r, key) for key, _ in COLUMNS)
        lines.append(f"| {r['model']} | {r['N']} | {r['B']} | {r['D']} | {cells} | {kernels} | {sizes} |")
    return "\n".join(lines) + "\n"


def lookup_forms(n, b, d):
    """The lookups of model (a) in three forms, on one GPU: (name, call) each, and the bytes a lookup
    must move (indices and rows read, rows written)."""
    ops = register_torch_ops()
    tables = [torch.randn(rows, d, device="cuda") for rows in vocab_sizes(n, SMALLEST_VOCAB)]
    ids = [i.cuda() for i in example_indices(n, b, smallest_vocab=SMALLEST_VOCAB)]
    joined = torch.cat(tables)
    sizes = torch.tensor([t.shape[0] for t in tables], device="cuda")
    offsets = torch.cumsum(sizes, 0) - sizes
    size, first, past_end = sizes.view(-1, 1), offsets.view(-1, 1), joined.shape[0]

    def standard_ops():  # what batch_embedding_lookups wrote before EmbeddingLookups
        index = torch.stack(ids)
        rows = torch.where(index < size, index + first, past_end)
        rows = torch.where(index < 0, past_end, rows)
        return torch.index_select(joined, 0, rows.reshape(-1)).view(n, b, d)

    def original():
        return torch.stack([torch.embedding(t, i) for t, i in zip(tables, ids, strict=True)])

    def fused():
        return ops.embedding_lookups(joined, torch.stack(ids), offsets, sizes, 0)

    forms = (
        ("original (N lookups, stack)", original),
        ("standard ops (stack, arithmetic, index_select)", standard_ops),
        ("graphopt (stack, EmbeddingLookups)", fused),
    )
    return forms, n * b * (8 + 2 * d * 4)


def lookups_only(args) -> None:
    bandwidth = copy_bandwidth_bytes_per_s()
    rows = []
    for n, b, d in itertools.product(args.n, args.batch, args.d):
        forms, moved = lookup_forms(n, b, d)
        expected = forms[0][1]()
        row = {"N": n, "B": b, "D": d, "roofline_us": round(moved / bandwidth * 1e6, 1)}
        with torch.no_grad():
            for name, call in forms:
                attempt(row, name, lambda call=call: call, expected.float(), args.iters)
        print(json.dumps(row), flush=True)
        rows.append(row)
    names = [name for name, _ in forms]
    lines = [
        f"# Embedding lookups alone ({torch.cuda.get_device_name()}, {datetime.date.today().isoformat()}): "
        "start-to-finish µs (GPU µs); roofline: the bytes a lookup moves at a device copy's bandwidth",
        "",
        "| N | B | D | roofline µs | " + " | ".join(names) + " |",
        "|" + "---|" * (len(names) + 4),
    ]
    for r in rows:
        cells = " | ".join(
            f"{r[k]['s2f_us']} ({r[k]['gpu_us']})" if "s2f_us" in r[k] else r[k]["error"][:40] for k in names
        )
        lines.append(f"| {r['N']} | {r['B']} | {r['D']} | {r['roofline_us']} | {cells} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "embedding_lookups.json").write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    (args.out / "embedding_lookups.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument(
        "--models", default="a", help="comma-separated: a (embedding stack), " + ", ".join(DLRM_VARIANTS)
    )
    parser.add_argument("--n", type=_ints, default=[8, 32, 128])
    parser.add_argument("--batch", type=_ints, default=[512, 4096])
    parser.add_argument("--d", type=_ints, default=[64, 128])
    parser.add_argument(
        "--compile",
        type=lambda s: [m for m in s.split(",") if m],
        default=["default"],
        help='modes; "" for none',
    )
    parser.add_argument("--norm", choices=("shared", "per-feature"), default="shared")
    parser.add_argument(
        "--max-loop-bags",
        type=int,
        default=20000,
        help="DLRM: time ONNX models whose exporter wrote a Loop per EmbeddingBag only up to N*B bags "
        "(each bag is one Loop iteration: about a second per call at 16k bags on a CPU)",
    )
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument(
        "--profile", action="store_true", help="write where graphopt's torch call spends host time"
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=0,
        help="start no configuration past this many seconds (0: no limit)",
    )
    parser.add_argument("--quick", action="store_true", help="N=128, B=4096, D=64 only")
    parser.add_argument("--lookups-only", action="store_true", help="time the lookups alone")
    args = parser.parse_args()
    if args.lookups_only:
        lookups_only(args)
        return
    grid = list(itertools.product(args.models.split(","), args.n, args.batch, args.d))
    if args.quick:
        grid = [(m, 128, 4096, 64) for m in args.models.split(",")]
    rows = []
    record = {
        "benchmark": "embedding lookups (issue: horizontal fusion of embedding lookups)",
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        # (the output folder is this run's own: written as OUT)
        "command": "python bench/bench_embeddings.py "
        + " ".join("OUT" if a == str(args.out) else a for a in sys.argv[1:]),
        "norm": args.norm,
        "smallest_vocab": SMALLEST_VOCAB,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for model, n, b, d in grid:
        if args.budget_s and time.perf_counter() - started > args.budget_s:
            rows.append({"model": model, "N": n, "B": b, "D": d, "error": "skipped: past --budget-s"})
            continue
        try:
            rows.append(one(model, n, b, d, args))
        except Exception as error:
            rows.append(
                {"model": model, "N": n, "B": b, "D": d, "error": f"{type(error).__name__}: {error}"[:200]}
            )
            torch.cuda.empty_cache()
        print(json.dumps(rows[-1]), flush=True)
        _save(record, args.out)  # (after every row: a run cut short still leaves what it measured)
    _save(record, args.out)
    print(markdown(record))


def _save(record: dict, out: Path) -> None:
    (out / "embeddings.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "embeddings.md").write_text(markdown(record))


if __name__ == "__main__":
    main()
