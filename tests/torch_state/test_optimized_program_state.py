"""The optimized program's state behaves as the original's: every tensor its module reads is a
parameter or a buffer (so ``.to()`` moves all of them), the state dict round-trips, a saved program
loads in a process that imports nothing of graphopt but the package, and torch.compile traces the
fused ops without a graph break."""

import subprocess
import sys
import warnings

import pytest
import torch
from state_models import MODELS, exported
from torch import nn

import graphopt

NAMES = list(MODELS)


@pytest.fixture(scope="module", params=NAMES)
def optimized(request):
    program, inputs = exported(request.param)
    result, report = graphopt.optimize(program)
    assert report.verification["ok"]
    calls = [n for n in result.graph.nodes if n.op == "call_function"]
    fused = any(getattr(n.target, "namespace", None) == "graphopt" for n in calls)
    assert fused or any(" merged into parameter " in note for note in report.notes)
    return request.param, result, report, inputs


def _run(module: nn.Module, inputs) -> torch.Tensor:
    with torch.no_grad():
        return module(*inputs)


def _tensors_held(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Every tensor attribute of the module and its submodules, registered or not."""
    found = []
    for prefix, sub in module.named_modules(remove_duplicate=False):
        held = {**vars(sub), **sub._parameters, **sub._buffers}
        found += [(f"{prefix}.{k}".lstrip("."), v) for k, v in held.items() if isinstance(v, torch.Tensor)]
    return found


def _original_run(name: str, inputs, dtype=None) -> torch.Tensor:
    program, _ = exported(name)
    module = program.module()
    if dtype is not None:
        module = module.to(dtype)
    return _run(module, inputs)


def test_every_tensor_the_module_holds_is_a_parameter_or_a_buffer(optimized):
    _, program, _, _ = optimized
    module = program.module()
    registered = {id(t) for _, t in module.named_parameters(remove_duplicate=False)}
    registered |= {id(t) for _, t in module.named_buffers(remove_duplicate=False)}
    stray = [name for name, tensor in _tensors_held(module) if id(tensor) not in registered]
    assert not stray
    module.to("meta")
    assert all(t.device.type == "meta" for _, t in _tensors_held(module))


def test_the_module_converts_to_another_dtype_like_the_original(optimized):
    name, _, _, inputs = optimized
    fresh, _ = exported(name)
    converted, _ = graphopt.optimize(fresh)
    wide = tuple(t.double() if t.is_floating_point() else t for t in inputs)
    got = _run(converted.module().to(torch.float64), wide)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, _original_run(name, wide, torch.float64), rtol=1e-9, atol=1e-9)


def test_parameter_count_equals_the_originals(optimized):
    name, program, report, _ = optimized
    original, _ = exported(name)
    count = sum(p.numel() for p in program.module().parameters())
    assert count == sum(p.numel() for p in original.module().parameters())
    assert not any("parameter values" in note for note in report.notes)


def test_state_dict_round_trip(optimized):
    _, program, _, inputs = optimized
    # (a module shares its program's tensors: these two load states into programs of their own)
    source, target = (graphopt.optimize(exported(optimized[0])[0])[0].module() for _ in range(2))
    before = _run(source, inputs)
    state = {k: torch.randn_like(v) if v.is_floating_point() else v for k, v in source.state_dict().items()}
    assert set(state) == set(program.state_dict)  # parameters and persistent buffers, as named
    source.load_state_dict(state)
    assert not torch.equal(_run(source, inputs), before)
    target.load_state_dict(source.state_dict())
    torch.testing.assert_close(_run(target, inputs), _run(source, inputs), rtol=0, atol=0)


def test_a_saved_program_loads_in_a_process_that_only_imports_graphopt(optimized, tmp_path):
    _, program, _, inputs = optimized
    torch.export.save(program, tmp_path / "model.pt2")
    torch.save(inputs, tmp_path / "inputs.pt")
    script = (
        "import sys, graphopt, torch\n"
        "folder = sys.argv[1]\n"
        "program = torch.export.load(f'{folder}/model.pt2')\n"
        "with torch.no_grad():\n"
        "    out = program.module()(*torch.load(f'{folder}/inputs.pt'))\n"
        "torch.save(out, f'{folder}/out.pt')\n"
        "print(sorted(m for m in sys.modules if m.startswith('graphopt')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = torch.load(tmp_path / "out.pt")
    torch.testing.assert_close(loaded, _run(program.module(), inputs), rtol=0, atol=0)


def test_torch_compile_traces_the_fused_ops_without_a_graph_break(optimized):
    name, program, _, inputs = optimized
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # aot_eager: Dynamo and AOT autograd trace the whole module as one graph (fullgraph raises at
        # any break), without a C++ build of the CPU kernels
        compiled = torch.compile(program.module(), fullgraph=True, backend="aot_eager")
        got = _run(compiled, inputs)
    torch.testing.assert_close(got, _original_run(name, inputs), rtol=1e-4, atol=1e-5)
