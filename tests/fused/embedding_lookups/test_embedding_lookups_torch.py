"""torch.ops.graphopt.embedding_lookups: exact rows on the CPU (torch's own lookup) and, where a GPU is
present, through the Triton kernel; the original's error for an index out of range of its feature's
table; gradients as torch's embedding gives them; opcheck, torch.export, torch.compile and both ONNX
exporters (graphopt::EmbeddingLookups nodes, which run through their fallback functions)."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fused_checks import GRADIENT_PATHS, session

from graphopt.fused import export, register_torch_ops
from graphopt.fused.embedding_lookups import EMBEDDING_LOOKUPS

ops = register_torch_ops()
SIZES = (7, 1, 50, 13)
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def tables(width=8, dtype=torch.float32, seed=0, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    table = torch.randn(sum(SIZES), width, generator=gen, dtype=torch.float64).to(dtype)
    offsets = torch.tensor([sum(SIZES[:k]) for k in range(len(SIZES))])
    return table.to(device), offsets.to(device), torch.tensor(SIZES).to(device)


def edge_indices(per_feature, dtype=torch.int64, *, wrap, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = torch.empty(len(SIZES), per_feature, dtype=torch.int64)
    for k, size in enumerate(SIZES):
        out[k] = torch.randint(-size if wrap else 0, size, (per_feature,), generator=gen)
        edges = [0, size - 1, *([-size, -1] if wrap else [])]
        out[k, : len(edges)] = torch.tensor(edges[:per_feature])
    return out.to(dtype)


def own_lookups(table, offsets, indices, wrap):
    """The original: each feature's indices looked up in its own table (a slice of the concatenation)."""
    rows = []
    for k, size in enumerate(SIZES):
        own = table[offsets[k] : offsets[k] + size]
        ids = indices[k].long()
        rows.append(
            torch.nn.functional.embedding(torch.where(ids < 0, ids + size, ids) if wrap else ids, own)
        )
    return torch.stack(rows)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("wrap", [False, True])
def test_rows_are_the_original_lookups(device, dtype, index_dtype, wrap):
    table, offsets, sizes = tables(24, dtype, device=device)
    indices = edge_indices(9, index_dtype, wrap=wrap).view(len(SIZES), 3, 3).to(device)
    y = ops.embedding_lookups(table, indices, offsets, sizes, int(wrap))
    assert y.shape == (len(SIZES), 3, 3, 24) and y.dtype == dtype
    assert torch.equal(y.cpu(), own_lookups(table.cpu(), offsets.cpu(), indices.cpu(), wrap))
    reference = EMBEDDING_LOOKUPS.reference(
        table.cpu().float().numpy(),
        indices.cpu().numpy(),
        offsets.cpu().numpy(),
        SIZES,
        wrap_negative=int(wrap),
    )
    np.testing.assert_array_equal(y.cpu().float().numpy(), reference)


@pytest.mark.parametrize("bad", ["past_own_table", "negative"])
def test_out_of_range_index_raises_the_originals_error_on_the_cpu(bad):
    table, offsets, sizes = tables()
    indices = edge_indices(5, wrap=False)
    indices[2, 3] = SIZES[2] if bad == "past_own_table" else -1
    with pytest.raises(IndexError, match="index out of range in self") as original:
        own_lookups(table, offsets, indices, wrap=False)
    with pytest.raises(IndexError) as fused:
        ops.embedding_lookups(table, indices, offsets, sizes, 0)
    assert str(fused.value) == str(original.value)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("lookup", ["original", "fused"])
def test_out_of_range_index_fails_the_cuda_launch_as_the_originals_assert_does(lookup):
    # A subprocess: the failed launch loses the CUDA context, the original's assert as the fused trap.
    script = textwrap.dedent(f"""
        import torch, graphopt
        table = torch.randn(20, 8, device="cuda")
        ids = torch.tensor([[0, 3], [1, 10]], device="cuda")  # 10 is past feature 1's ten rows
        offsets, sizes = torch.tensor([0, 10], device="cuda"), torch.tensor([10, 10], device="cuda")
        if "{lookup}" == "original":
            torch.embedding(table[10:], ids[1])
        else:
            torch.ops.graphopt.embedding_lookups(table, ids, offsets, sizes, 0)
        torch.cuda.synchronize()
        print("no error")
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parents[3]), env.get("PYTHONPATH")])
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0 and "no error" not in done.stdout, done.stderr[-2000:]
    assert re.search(r"CUDA error|device-side assert|launch failure", done.stderr), done.stderr[-2000:]


def test_wrapped_negatives_past_the_table_still_raise():
    table, offsets, sizes = tables()
    indices = edge_indices(5, wrap=True)
    indices[3, 0] = -SIZES[3] - 1  # one before feature 3's table: feature 2's last row once offset
    with pytest.raises(IndexError, match="index out of range in self"):
        ops.embedding_lookups(table, indices, offsets, sizes, 1)


@pytest.mark.parametrize("path", GRADIENT_PATHS)
def test_table_gradient_is_the_original_lookups(path):
    table, offsets, sizes = tables(6, torch.float64)
    indices = edge_indices(7, wrap=True)
    grad = torch.randn(len(SIZES), 7, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    fused = table.clone().requires_grad_()
    with GRADIENT_PATHS[path]():
        ops.embedding_lookups(fused, indices, offsets, sizes, 1).backward(grad)
    original = table.clone().requires_grad_()
    own_lookups(original, offsets, indices, wrap=True).backward(grad)
    torch.testing.assert_close(fused.grad, original.grad, rtol=0, atol=1e-12)


def test_opcheck():
    table, offsets, sizes = tables()
    for indices, wrap in ((edge_indices(4, wrap=True), 1), (edge_indices(3, torch.int32, wrap=False), 0)):
        torch.library.opcheck(ops.embedding_lookups.default, (table, indices, offsets, sizes, wrap))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("float_indices", "indices must be int32 or int64"),
        ("scalar_indices", "feature dim first"),
        ("short_offsets", r"offsets must be \[4\]"),
        ("int32_sizes", "sizes must be int64"),
        ("vector_table", r"table must be \[rows, dim\]"),
        ("meta_offsets", "offsets must be on the table's device cpu, got meta"),
    ],
)
def test_refusals(change, message):
    table, offsets, sizes = tables()
    indices = edge_indices(3, wrap=False)
    if change == "float_indices":
        indices = indices.float()
    elif change == "scalar_indices":
        indices = indices[0, 0]
    elif change == "short_offsets":
        offsets = offsets[:3]
    elif change == "int32_sizes":
        sizes = sizes.int()
    elif change == "meta_offsets":
        offsets = offsets.to("meta")
    else:
        table = table[0]
    with pytest.raises(RuntimeError, match=message):
        ops.embedding_lookups(table, indices, offsets, sizes, 0)


class Lookups(torch.nn.Module):
    def __init__(self):
        super().__init__()
        table, offsets, sizes = tables()
        self.table = torch.nn.Parameter(table)
        self.register_buffer("offsets", offsets)
        self.register_buffer("sizes", sizes)

    def forward(self, indices):
        return torch.ops.graphopt.embedding_lookups(self.table, indices, self.offsets, self.sizes, 0)


def test_export_keeps_one_op():
    program = torch.export.export(Lookups(), (edge_indices(6, wrap=False),))
    targets = [str(n.target) for n in program.run_decompositions().graph.nodes if n.op == "call_function"]
    assert targets.count("graphopt.embedding_lookups.default") == 1


@pytest.mark.parametrize("device", DEVICES)
def test_compile_without_graph_breaks_gives_the_same_rows(device):
    indices = edge_indices(6, torch.int32, wrap=False).to(device)
    module = Lookups().to(device)
    compiled = torch.compile(module, fullgraph=True)
    with torch.no_grad():
        assert torch.equal(compiled(indices), module(indices))


@pytest.mark.parametrize("dynamo", [True, False])
def test_both_exporters_write_embedding_lookups_nodes(dynamo):
    indices = edge_indices(6, wrap=False)
    model = export(Lookups().eval(), (indices,), dynamo=dynamo)
    fused = [n for n in model.graph.node if n.op_type == "EmbeddingLookups"]
    assert [n.domain for n in fused] == ["graphopt"]
    feeds = {model.graph.input[0].name: indices.numpy()}
    (out,) = session(model).run(None, feeds)
    with torch.no_grad():
        np.testing.assert_array_equal(out, Lookups()(indices).numpy())
