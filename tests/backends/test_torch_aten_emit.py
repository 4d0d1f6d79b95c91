"""Every canonical op a pass can create is written as aten calls (or torch.ops.graphopt.*) that compute
what the op means, with symbolic dims where the program has them."""

import io
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from graphopt.analysis import verify
from graphopt.backends.torch_export import to_exported_program
from graphopt.frontends.torch_export import from_exported_program
from graphopt.ir import DType
from graphopt.rewrite import Builder

W = np.linspace(-1.0, 1.0, 20, dtype=np.float32).reshape(5, 4)  # a [K, D] weight made by a pass
SCALE = np.linspace(0.5, 1.5, 4, dtype=np.float32)


def _layer_norm(x):
    return F.layer_norm(x, (4,), eps=1e-5)


# name -> (build the IR values from x [batch, 3, 4], what they must equal)
CASES = {
    "relu": (lambda b, x: b.relu(x), torch.relu),
    "tanh": (lambda b, x: b.tanh(x), torch.tanh),
    "sigmoid": (lambda b, x: b.sigmoid(x), torch.sigmoid),
    "silu": (lambda b, x: b.silu(x), F.silu),
    "gelu_tanh": (lambda b, x: b.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
    "erf": (lambda b, x: b.erf(x), torch.erf),
    "exp_neg": (lambda b, x: b.exp(b.neg(x)), lambda x: torch.exp(-x)),
    "rsqrt_sqrt_reciprocal": (
        lambda b, x: b.reciprocal(b.sqrt(b.rsqrt(b.exp(x)))),
        lambda x: 1 / torch.sqrt(torch.rsqrt(torch.exp(x))),
    ),
    "scalar_after": (lambda b, x: b.mul(x, _scalar(b, 0.5)), lambda x: x * 0.5),
    "scalar_before_add": (lambda b, x: b.add(_scalar(b, 2.0), x), lambda x: 2.0 + x),
    "scalar_before_sub": (lambda b, x: b.sub(_scalar(b, 1.0), x), lambda x: 1.0 - x),
    "div_pow": (lambda b, x: b.pow(b.div(x, x), _scalar(b, 2.0)), lambda x: (x / x) ** 2),
    "reshape_keeping_batch": (lambda b, x: b.reshape(x, shape=(0, 12)), lambda x: x.reshape(x.shape[0], 12)),
    "transpose": (lambda b, x: b.transpose(x, perm=(0, 2, 1)), lambda x: x.permute(0, 2, 1)),
    "unsqueeze_squeeze": (
        lambda b, x: b.squeeze(b.unsqueeze(x, axes=(1, 4)), axes=(4,)),
        lambda x: x.unsqueeze(1),
    ),
    "split": (lambda b, x: b.split(x, axis=2, sizes=(1, 3)), lambda x: torch.split(x, [1, 3], dim=2)),
    "slice": (
        lambda b, x: b.slice(x, axes=(2,), starts=(1,), ends=(3,), steps=(1,)),
        lambda x: x[:, :, 1:3],
    ),
    "concat_stack": (
        lambda b, x: (b.concat(x, x, axis=1), b.stack(x, x, axis=3)),
        lambda x: (torch.cat([x, x], 1), torch.stack([x, x], 3)),
    ),
    "gather": (
        lambda b, x: b.gather(x, b.constant(np.asarray([2, 0]), "idx"), axis=2),
        lambda x: x[:, :, [2, 0]],
    ),
    "cast": (lambda b, x: b.cast(x, to=DType.FLOAT64), lambda x: x.double()),
    "constant": (
        lambda b, x: b.add(x, b.constant(SCALE, "scale")),
        lambda x: x + torch.from_numpy(SCALE),
    ),
    "layer_norm": (lambda b, x: b.layer_norm(x, axis=2, eps=1e-5), _layer_norm),
    "rms_norm": (
        lambda b, x: b.rms_norm(x, b.constant(SCALE, "scale"), axis=2, eps=1e-6),
        lambda x: F.rms_norm(x, (4,), torch.from_numpy(SCALE), eps=1e-6),
    ),
    "reduce_mean": (lambda b, x: b.reduce_mean(x, axes=(2,), keepdims=True), lambda x: x.mean(2, True)),
    "var_mean": (
        lambda b, x: b.var_mean(x, axes=(2,), correction=0, keepdims=False),
        lambda x: torch.var_mean(x, dim=2, correction=0),
    ),
    "matmul_linear": (
        lambda b, x: (b.matmul(x, b.constant(W.T.copy(), "wt")), b.linear(x, b.constant(W, "w"))),
        lambda x: (x @ torch.from_numpy(W.T.copy()), F.linear(x, torch.from_numpy(W))),
    ),
    "norm_act": (
        lambda b, x: b.norm_act(x, None, None, norm="layer", activation="tanh", eps=1e-5, axis=2),
        lambda x: torch.tanh(_layer_norm(x)),
    ),
    "add_norm_act": (
        lambda b, x: b.norm_act(x, None, None, x, norm="rms", activation="relu", eps=1e-6, axis=2),
        lambda x: (torch.relu(F.rms_norm(x + x, (4,), eps=1e-6)), x + x),
    ),
    "norm_act_linear": (
        lambda b, x: b.norm_act_linear(
            x,
            None,
            None,
            b.constant(W, "w"),
            None,
            norm="layer",
            activation="gelu",
            eps=1e-5,
            out_activation="identity",
        ),
        lambda x: F.linear(F.gelu(_layer_norm(x)), torch.from_numpy(W)),
    ),
}


def _scalar(b, number):
    return b.constant(np.asarray(number, dtype=np.float32), "number")


class _Copies(nn.Module):
    def __init__(self, count):
        super().__init__()
        self.count = count

    def forward(self, x):
        return tuple(x for _ in range(self.count))


def _as_list(result) -> list:
    return list(result) if isinstance(result, tuple | list) else [result]


@pytest.fixture(scope="module")
def program_and_reference():
    """One program with an output per op value above; each output is rebuilt from the canonical op."""
    sample = torch.randn(2, 3, 4)
    slots = [(name, len(_as_list(reference(sample)))) for name, (_, reference) in CASES.items()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batch = torch.export.Dim("batch", min=2)
        copies = _Copies(sum(count for _, count in slots))
        program = torch.export.export(copies, (sample,), dynamic_shapes=({0: batch},))
    graph = from_exported_program(program)
    (x,) = graph.inputs
    values = []
    for name, (build, _) in CASES.items():
        values.extend(_as_list(build(Builder(graph, f"emit_{name}"), x)))
    graph.set_outputs(values)
    verify(graph)
    return to_exported_program(graph), slots


def test_every_new_node_has_a_fake_value_and_its_rule(program_and_reference):
    program, _ = program_and_reference
    calls = [n for n in program.graph.nodes if n.op == "call_function"]
    assert calls and all("val" in n.meta for n in calls)
    ruled = [n for n in calls if "graphopt_rule" in n.meta]
    assert {n.meta["graphopt_rule"] for n in ruled} >= {f"emit_{name}" for name in CASES}
    made = [n for n in ruled if n.meta["graphopt_rule"] == "emit_reshape_keeping_batch"]
    targets = [n.target for n in made]
    assert targets == [torch.ops.aten.sym_size.int, torch.ops.aten.reshape.default]
    assert not isinstance(made[1].meta["val"].shape[0], int)  # the batch dim stays symbolic


@pytest.mark.parametrize("batch", [2, 5])
def test_each_op_computes_what_it_means(program_and_reference, batch):
    program, slots = program_and_reference
    x = torch.randn(batch, 3, 4, generator=torch.Generator().manual_seed(batch))
    with torch.no_grad():
        got = list(program.module()(x))
    for name, count in slots:
        want = _as_list(CASES[name][1](x))
        assert len(want) == count, name
        for g, w in zip(got[:count], want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, msg=name)
        got = got[count:]


def test_new_tensors_made_from_no_state_are_non_persistent_buffers_saved_with_the_program(
    program_and_reference,
):
    program, _ = program_and_reference
    kinds = {s.arg.name: s for s in program.graph_signature.input_specs}
    made = [s for s in kinds.values() if s.target and s.target.startswith("graphopt_")]
    assert made and all(s.kind == torch.export.graph_signature.InputKind.BUFFER for s in made)
    assert all(s.persistent is False and s.target in program.constants for s in made)
    assert {name for name, _ in program.module().named_buffers()} >= {s.target for s in made}
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    x = torch.randn(3, 3, 4)
    for a, b in zip(loaded.module()(x), program.module()(x), strict=True):
        assert torch.equal(a, b)
