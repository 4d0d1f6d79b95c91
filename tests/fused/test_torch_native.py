"""The C++ eager kernels (``graphopt.fused.torch_native``): built against this PyTorch, put in front
of the ops' Python kernels for the CUDA keys, and sending every call they do not take (a gradient, a
trace, an argument the fast path does not read) to those Python kernels.

On a machine without a GPU the build, the switch and the dispatch table are checked in a fresh
process (the switch is process-wide); with a GPU, the fast path's results and every way around it."""

import ctypes
import subprocess
import sys
import textwrap

import pytest
import torch
from fused_checks import assert_close

from graphopt.fused import NORM_ACT, register_torch_ops
from graphopt.fused.torch_native import build
from graphopt.ort import library_path

ops = register_torch_ops()
CUDA = torch.cuda.is_available()
# The op forms with a C++ fast path (each op's torch_eager.cc).
FAST_PATHS = (
    "norm_act", "add_norm_act", "norm_act_linear", "add_norm_act_linear", "group_norm_act",
    "add_group_norm_act", "affine_act",
)  # fmt: skip
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _library_has_entries() -> bool:
    return hasattr(ctypes.CDLL(library_path()), "GraphoptEagerNormActRows")


def _run(code: str, **env) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600,
        env={**os.environ, **env},
    )  # fmt: skip


SWITCH = """
    import torch, graphopt
    from graphopt.fused import torch_native
    from graphopt.fused.torch_ops import CUDA_KERNELS
    print("active", ",".join(torch_native.activate(CUDA_KERNELS)))
    print("why", torch_native.why_inactive())
    for line in torch._C._dispatch_dump("graphopt::norm_act").splitlines():
        if line.startswith(("CUDA:", "AutogradCUDA:", "CPU:")):
            print("table", line.split(" :: ")[0])
    x = torch.randn(3, 16, dtype=torch.float64) * 5 + 100
    y = torch.ops.graphopt.norm_act(x.float(), None, None, "layer", "gelu", 1e-5, -1)
    ref = torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (16,), eps=1e-5))
    print("cpu_error", float((y.double() - ref).abs().max()))
"""


@pytest.mark.skipif(CUDA, reason="the CPU-only checks of the switch (a GPU runs the real ones below)")
def test_the_cpp_kernels_build_and_take_the_cuda_keys_in_a_fresh_process(tmp_path):
    done = _run(SWITCH, GRAPHOPT_CACHE=str(tmp_path))  # (a fresh build, nothing left in the user's cache)

    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if not line.startswith("table"))
    table = [line for line in done.stdout.splitlines() if line.startswith("table")]
    if not _library_has_entries():  # a libgraphopt_ort built without CUDA kernels
        assert lines["active"] == "" and "has no CUDA kernels" in lines["why"]
        return
    assert set(lines["active"].split(",")) == set(FAST_PATHS), done.stderr
    assert any("CUDA: registered at" in t and "dispatch.cc" in t for t in table), table
    assert any("AutogradCUDA: registered at" in t and "dispatch.cc" in t for t in table), table
    assert any(t.startswith("table CPU:") and "torch_ops.py" in t for t in table), table  # CPU keeps Python
    assert float(lines["cpu_error"]) < 1e-5
    assert "Overriding a previously registered kernel" not in done.stderr
    assert "building the C++ eager kernels" in done.stderr and len(list(tmp_path.rglob("*.so"))) == 1


def test_the_switch_can_be_turned_off(tmp_path):
    done = _run(SWITCH, GRAPHOPT_TORCH_NATIVE="0", GRAPHOPT_CACHE=str(tmp_path))

    assert done.returncode == 0, done.stderr
    assert "active \n" in done.stdout and "why GRAPHOPT_TORCH_NATIVE=0" in done.stdout
    assert all("dispatch.cc" not in line for line in done.stdout.splitlines())
    assert not list(tmp_path.rglob("*.so"))  # nothing built


def test_a_missing_compiler_leaves_the_python_kernels_in_charge_and_says_why(tmp_path):
    done = _run(SWITCH, CXX=str(tmp_path / "no-such-compiler"), GRAPHOPT_CACHE=str(tmp_path))

    assert done.returncode == 0, done.stderr
    assert "active \n" in done.stdout
    assert "the C++ compiler did not run" in done.stdout and "no-such-compiler" in done.stdout
    assert "eager CUDA calls stay in Python" in done.stderr
    assert float(done.stdout.split("cpu_error ")[1]) < 1e-5  # the ops work as before


def test_a_build_failure_names_the_compiler_error(tmp_path, monkeypatch):
    broken = tmp_path / "broken.cc"
    broken.write_text("this is not C++\n")
    monkeypatch.setenv("GRAPHOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "sources", lambda: [broken])

    with pytest.raises(build.BuildError, match=r"compiling failed: .*broken\.cc.*error"):
        build.built_library()
    assert not list((tmp_path / "cache").rglob("*.so"))  # nothing half-written is kept


def test_the_cache_key_follows_the_sources(tmp_path, monkeypatch):
    source = tmp_path / "a.cc"
    source.write_text("int a;\n")
    monkeypatch.setattr(build, "sources", lambda: [source])
    first = build.key()
    source.write_text("int b;\n")
    assert build.key() != first


# --- on a GPU ---------------------------------------------------------------------------------------

gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def native():
    from graphopt.fused import torch_native
    from graphopt.fused.torch_ops import CUDA_KERNELS

    active = torch_native.activate(CUDA_KERNELS)
    if "norm_act" not in active:
        pytest.fail(f"the C++ kernels did not switch on: {torch_native.why_inactive()}")
    return active


def _reference(x, w, b, r, norm, activation):
    def f64(t):
        return None if t is None else t.detach().double().cpu().numpy()

    return NORM_ACT.reference(
        f64(x), f64(w), f64(b), f64(r), norm=norm, activation=activation, epsilon=1e-5, axis=-1
    )  # fmt: skip


def _inputs(dtype, *shape, offset=0.0):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(*shape, device="cuda", generator=g) * 3 + offset).to(dtype)
    w = torch.randn(shape[-1], device="cuda", generator=g).to(dtype)
    b = torch.randn(shape[-1], device="cuda", generator=g).to(dtype)
    r = torch.randn(*shape, device="cuda", generator=g).to(dtype)
    return x, w, b, r


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("shape", [(4, 96, 768), (1000, 256), (3, 5000)])
def test_the_fast_path_matches_the_float64_reference(native, shape, norm, dtype):
    x, w, b, r = _inputs(DTYPES[dtype], *shape, offset=40.0)
    bias = b if norm == "layer" else None

    with torch.no_grad():
        y = ops.norm_act(x, w, bias, norm, "gelu", 1e-5, -1)
        y2, total = ops.add_norm_act(x, r, w, bias, norm, "silu", 1e-5, -1)

    assert y.dtype == x.dtype and y.is_contiguous()
    assert_close(y.float().cpu(), _reference(x, w, bias, None, norm, "gelu")[0], dtype)
    # (the op normalizes the sum as stored: rounded to x's dtype)
    stored_sum = (x.double() + r.double()).to(x.dtype)
    assert_close(y2.float().cpu(), _reference(stored_sum, w, bias, None, norm, "silu")[0], dtype)
    assert_close(total.float().cpu(), _reference(x, w, bias, r, norm, "silu")[1], dtype)


@gpu
def test_the_fast_path_agrees_with_the_python_kernels(native):
    x, w, b, _ = _inputs(torch.float32, 64, 1024)

    fast = ops.norm_act(x, w, b, "layer", "gelu_tanh", 1e-5, -1)
    python = torch.ops.graphopt_eager.norm_act(x, w, b, "layer", "gelu_tanh", 1e-5, -1)

    torch.testing.assert_close(fast, python, rtol=1e-6, atol=1e-6)


@gpu
def test_non_finite_rows_stay_non_finite(native):
    x, w, b, _ = _inputs(torch.float32, 8, 256)
    x[1, 3], x[2, 0], x[3] = float("nan"), float("inf"), 3e38

    y = ops.norm_act(x, w, b, "layer", "relu", 1e-5, -1)

    assert y[1].isnan().all() and y[2].isnan().all()
    assert torch.isfinite(y[[0, 4, 5, 6, 7]]).all()


@gpu
@pytest.mark.parametrize("case", ["float32 scale on bfloat16", "transposed input", "empty"])
def test_calls_the_fast_path_declines_are_right_through_python(native, case):
    x, w, b, r = _inputs(torch.bfloat16 if "bfloat16" in case else torch.float32, 6, 32, 64)
    if "float32 scale" in case:
        w = w.float()
    elif case == "transposed input":
        x = x.transpose(0, 1)
        r = r.transpose(0, 1)
    elif case == "empty":
        x, r = x[:0], r[:0]

    y, total = ops.add_norm_act(x, r, w, b, "layer", "gelu", 1e-5, -1)

    expected_y, expected_sum = _reference(x.float(), w.float(), b.float(), r.float(), "layer", "gelu")
    dtype = "bfloat16" if x.dtype == torch.bfloat16 else "float32"
    assert_close(y.float().cpu(), expected_y, dtype)
    assert_close(total.float().cpu(), expected_sum, dtype)


@pytest.fixture
def python_launches(monkeypatch):
    """NormAct's Python launches (the path a call the C++ kernel declines takes), as they happen."""
    from graphopt.fused.norm_act import torch_impl

    calls, real = [], torch_impl.launch

    def counted(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch_impl, "launch", counted)
    return calls


# Operands that broadcast over X [6, 32, 64]'s rows, as the Python kernels read them: (scale, bias,
# residual) shapes, or "chunk" for a strided per-slice view (an adaptive norm's scale and shift, chunks
# of one projection of the timestep).
BROADCAST_CASES = {
    "per-slice scale and shift": ((6, 1, 64), (6, 1, 64), None),
    "chunked per-slice scale and shift": ("chunk", "chunk", None),
    "position embedding [1, T, D]": ((64,), (64,), (1, 32, 64)),
    "position embedding [T, D]": ((64,), None, (32, 64)),
    "residual of the normalized shape": ((64,), (64,), (64,)),
    "scale per row": ((6, 32, 64), (64,), (6, 32, 64)),
}


@gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", list(BROADCAST_CASES))
def test_broadcast_operands_take_the_fast_path(native, case, dtype, python_launches):
    """Per-slice scales and shifts (adaptive layer norms: DiT, PixArt) and broadcast residuals
    (position embeddings) launch from C++ too: through Python each call cost a launch from Python."""
    t = DTYPES[dtype]
    g = torch.Generator(device="cuda").manual_seed(1)
    x = (torch.randn(6, 32, 64, device="cuda", generator=g) * 3 + 20).to(t)
    emb = torch.randn(6, 2 * 64, device="cuda", generator=g).to(t)

    def operand(shape, index):
        if shape == "chunk":  # [6, 1, 64] with a row stride of 128: not contiguous
            return emb.chunk(2, dim=1)[index][:, None]
        return None if shape is None else torch.randn(*shape, device="cuda", generator=g).to(t)

    w_shape, b_shape, r_shape = BROADCAST_CASES[case]
    w, b, r = operand(w_shape, 0), operand(b_shape, 1), operand(r_shape, 0)
    with torch.no_grad():
        if r is None:
            y, total = ops.norm_act(x, w, b, "layer", "silu", 1e-5, -1), None
        else:
            y, total = ops.add_norm_act(x, r, w, b, "layer", "silu", 1e-5, -1)

    assert not python_launches
    stored_sum = x if r is None else (x.double() + r.double()).to(t)  # (normalized as stored)
    assert_close(y.float().cpu(), _reference(stored_sum, w, b, None, "layer", "silu")[0], dtype)
    if r is not None:
        assert_close(total.float().cpu(), _reference(x, w, b, r, "layer", "silu")[1], dtype)


@gpu
def test_a_call_that_needs_a_gradient_records_one(native):
    x, w, b, _ = _inputs(torch.float32, 16, 128)
    x.requires_grad_(True)

    y = ops.norm_act(x, w, b, "layer", "gelu", 1e-5, -1)
    y.sum().backward()

    expected = x.detach().clone().requires_grad_(True)
    torch.nn.functional.gelu(torch.nn.functional.layer_norm(expected, (128,), w, b, 1e-5)).sum().backward()
    assert y.grad_fn is not None
    torch.testing.assert_close(x.grad, expected.grad, rtol=1e-4, atol=1e-5)


# Calls that need a gradient, by op form: (op name, its arguments from x, w, b, r and a 4-d x).
GRAD_CALLS = {
    "norm_act": lambda x, w, b, r, x4: (x, w, b, "layer", "gelu", 1e-5, -1),
    "add_norm_act": lambda x, w, b, r, x4: (x, r, w, None, "rms", "silu", 1e-6, -1),
    "affine_act": lambda x, w, b, r, x4: (x, w, b, "gelu_tanh", -1),
    "group_norm_act": lambda x, w, b, r, x4: (x4, w, b, 8, "silu", 1e-5),
    "add_group_norm_act": lambda x, w, b, r, x4: (x4, x4.flip(0), w, None, 4, "sigmoid", 1e-5),
}


@pytest.fixture
def python_math_calls(monkeypatch):
    """The calls that ran an op's Python math path (torch_direct's), as they happen."""
    from graphopt.fused import torch_direct

    calls, real = [], torch_direct.storage_precision

    def counted(math, args):
        calls.append(math)
        return real(math, args)

    monkeypatch.setattr(torch_direct, "storage_precision", counted)
    return calls


@gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", list(GRAD_CALLS))
def test_a_call_that_needs_a_gradient_runs_the_native_ops_in_cpp(native, name, dtype, python_math_calls):
    """An eager call whose parameters require gradients (an exported program's module() as is) runs
    the unfused program's native ops from C++: the values and gradients of the Python math path, bit
    for bit, without entering Python."""
    x, w, b, r = _inputs(DTYPES[dtype], 6, 32, 64, offset=20.0)
    x4 = x.view(6, 64, 4, 8)
    w, b = w.clone().requires_grad_(), b.clone().requires_grad_()
    args = GRAD_CALLS[name](x, w, b, r, x4)

    fast = getattr(ops, name)(*args)
    assert not python_math_calls
    python = getattr(torch.ops.graphopt_eager, name)(*args)
    assert python_math_calls  # (the counter sees the Python path)

    fast, python = (out if isinstance(out, tuple) else (out,) for out in (fast, python))
    for mine, theirs in zip(fast, python, strict=True):
        assert torch.equal(mine, theirs) and mine.is_contiguous()
    weights = torch.randn_like(fast[0])

    def gradients(y):
        found = torch.autograd.grad((y * weights).sum(), (w, b), allow_unused=True)
        return [g for g in found if g is not None]

    for mine, theirs in zip(gradients(fast[0]), gradients(python[0]), strict=True):
        assert torch.equal(mine, theirs)


@gpu
@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_a_call_needing_a_gradient_with_per_slice_operands_runs_the_native_ops_in_cpp(
    native, norm, python_math_calls
):
    """An adaptive norm's scale and shift (per slice, computed from parameters that require gradients)
    in grad mode: the norm without affine, then the broadcasting multiply and add, as the unfused
    program ran them; the values and gradients of the Python math path."""
    x = _inputs(torch.float32, 6, 32, 64)[0]
    scale = torch.randn(6, 1, 64, device="cuda", requires_grad=True)
    shift = torch.randn(6, 1, 64, device="cuda", requires_grad=True)

    fast = ops.norm_act(x, scale, shift, norm, "relu", 1e-5, -1)
    assert not python_math_calls
    python = torch.ops.graphopt_eager.norm_act(x, scale, shift, norm, "relu", 1e-5, -1)
    assert python_math_calls

    torch.testing.assert_close(fast, python, rtol=1e-6, atol=1e-6)
    normalized = (
        torch.nn.functional.layer_norm(x, (64,), None, None, 1e-5)
        if norm == "layer"
        else torch.nn.functional.rms_norm(x, (64,), None, 1e-5)
    )
    expected = torch.relu(normalized * scale + shift)
    torch.testing.assert_close(fast, expected, rtol=1e-5, atol=1e-5)
    weights = torch.randn_like(fast)
    mine = torch.autograd.grad((fast * weights).sum(), (scale, shift))
    theirs = torch.autograd.grad((expected * weights).sum(), (scale, shift))
    for a, e in zip(mine, theirs, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


@gpu
def test_a_call_needing_a_gradient_that_the_cpp_math_declines_takes_the_python_math(
    native, python_math_calls
):
    x = _inputs(torch.bfloat16, 6, 32, 64)[0]
    scale = torch.randn(64, device="cuda", requires_grad=True)  # (float32 on bfloat16: mixed dtypes)

    y = ops.norm_act(x, scale, None, "layer", "relu", 1e-5, -1)

    assert python_math_calls
    expected = torch.relu(torch.nn.functional.layer_norm(x.float(), (64,), None, None, 1e-5) * scale)
    torch.testing.assert_close(y.float(), expected, rtol=2e-2, atol=2e-2)
    (grad,) = torch.autograd.grad(y.float().sum(), scale)
    (expected_grad,) = torch.autograd.grad(expected.sum(), scale)
    torch.testing.assert_close(grad, expected_grad, rtol=2e-2, atol=2e-1)


@gpu
def test_inference_mode_and_another_stream_and_device_index(native):
    x, w, b, _ = _inputs(torch.float16, 32, 512)
    expected = ops.norm_act(x, w, b, "rms", "silu", 1e-5, -1)
    stream = torch.cuda.Stream()
    with torch.inference_mode(), torch.cuda.stream(stream):
        y = ops.norm_act(x, w, b, "rms", "silu", 1e-5, -1)
    stream.synchronize()

    assert torch.equal(y, expected)


@gpu
def test_a_cuda_graph_replays_the_fast_path(native):
    x, w, b, _ = _inputs(torch.float32, 128, 768)
    ops.norm_act(x, w, b, "layer", "gelu", 1e-5, -1)  # (kernel loaded before the capture)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        y = ops.norm_act(x, w, b, "layer", "gelu", 1e-5, -1)
    x.copy_(torch.randn_like(x) * 7 - 2)
    graph.replay()

    torch.testing.assert_close(y, ops.norm_act(x, w, b, "layer", "gelu", 1e-5, -1), rtol=0, atol=0)


@gpu
def test_traces_still_record_graphopts_op(native):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(64))

        def forward(self, x):
            return ops.norm_act(x, self.w, None, "rms", "silu", 1e-5, -1) * 2

    block = Block().cuda()
    x = torch.randn(8, 64, device="cuda")
    compiled = torch.compile(block, fullgraph=True)
    torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    program = torch.export.export(block, (x,))
    targets = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert "graphopt.norm_act.default" in targets and not any("graphopt_eager" in t for t in targets)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 64, 16, 16), (1, 512, 3199), (8, 128, 32, 32)])
def test_group_norm_act_fast_path_matches_the_float64_reference(native, shape, dtype):
    from graphopt.fused.group_norm_act.spec import reference

    g = torch.Generator(device="cuda").manual_seed(1)
    x = (torch.randn(*shape, device="cuda", generator=g) * 2 + 10).to(DTYPES[dtype])
    r = torch.randn(*shape, device="cuda", generator=g).to(DTYPES[dtype])
    w, b = (torch.randn(shape[1], device="cuda", generator=g).to(DTYPES[dtype]) for _ in range(2))
    groups = 32 if shape[1] % 32 == 0 else shape[1]

    with torch.no_grad():
        y = ops.group_norm_act(x, w, b, groups, "silu", 1e-5)
        y2, total = ops.add_group_norm_act(x, r, w, b, groups, "gelu", 1e-5)

    def f64(t):
        return t.double().cpu().numpy()

    assert_close(
        y.float().cpu(),
        reference(f64(x), f64(w), f64(b), groups=groups, activation="silu", epsilon=1e-5)[0],
        dtype,
    )
    stored_sum = (x.double() + r.double()).to(x.dtype)
    expected = reference(f64(stored_sum), f64(w), f64(b), groups=groups, activation="gelu", epsilon=1e-5)[0]
    assert_close(y2.float().cpu(), expected, dtype)
    assert_close(total.float().cpu(), f64(x) + f64(r), dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [-1, 1])
def test_affine_act_fast_path_matches_the_float64_reference(native, axis, dtype):
    from graphopt.fused.affine_act.spec import reference

    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(4, 96, 48, device="cuda", generator=g).to(DTYPES[dtype])
    channels = x.shape[axis]
    w, b = (torch.randn(channels, device="cuda", generator=g).to(DTYPES[dtype]) for _ in range(2))

    y = ops.affine_act(x, w, b, "gelu_tanh", axis)

    expected = reference(*(t.double().cpu().numpy() for t in (x, w, b)), activation="gelu_tanh", axis=axis)
    assert_close(y.float().cpu(), expected, dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_norm_act_linear_fast_path_matches_the_float64_reference(native, dtype):
    from graphopt.fused.norm_act_linear.spec import reference

    g = torch.Generator(device="cuda").manual_seed(3)
    x = (torch.randn(3, 512, 256, device="cuda", generator=g) + 5).to(DTYPES[dtype])
    r = torch.randn(3, 512, 256, device="cuda", generator=g).to(DTYPES[dtype])
    w, b = (torch.randn(256, device="cuda", generator=g).to(DTYPES[dtype]) for _ in range(2))
    lw = (torch.randn(8, 256, device="cuda", generator=g) / 16).to(DTYPES[dtype])
    lb = torch.randn(8, device="cuda", generator=g).to(DTYPES[dtype])

    y = ops.norm_act_linear(x, w, b, lw, lb, "layer", "relu", 1e-5, "sigmoid")
    y2, total = ops.add_norm_act_linear(x, r, w, b, lw, None, "rms", "silu", 1e-5, "identity")

    def f64(t):
        return None if t is None else t.double().cpu().numpy()

    common = {"epsilon": 1e-5}
    expected = reference(f64(x), f64(w), f64(b), f64(lw), f64(lb), norm="layer", activation="relu",
                         out_activation="sigmoid", **common)  # fmt: skip
    assert y.shape == (3, 512, 8)
    assert_close(y.float().cpu(), expected[0] if isinstance(expected, tuple) else expected, dtype)
    stored_sum = (x.double() + r.double()).to(x.dtype)
    expected2 = reference(f64(stored_sum), f64(w), f64(b), f64(lw), None, norm="rms", activation="silu",
                          out_activation="identity", **common)  # fmt: skip
    assert_close(y2.float().cpu(), expected2[0] if isinstance(expected2, tuple) else expected2, dtype)
    assert_close(total.float().cpu(), f64(x) + f64(r), dtype)
