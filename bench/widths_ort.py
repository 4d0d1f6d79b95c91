"""ONNX Runtime for bench/bench_widths.py: one-node models of graphopt's fused ops (run by the custom-op
library's kernels, the AOT cubins on the CUDA EP), ONNX Runtime's own ops for the same computation
(LayerNormalization and the activation's nodes, which its optimizer fuses as it can), and an Identity
for ONNX Runtime's own copy; sessions whose runs read and write torch tensors in place (I/O binding).

On a GPU the session runs on a stream of ours (``user_compute_stream``; the benchmark makes it torch's
current stream too, so torch's checks and ORT's runs are ordered on it) and does not synchronize at
the end of a run, so its runs can be captured in a CUDA graph like torch's calls. Without a GPU the
same models run on the CPU EP, which tests the models and bindings, not ORT's CUDA kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import onnx
import torch
from onnx import TensorProto, helper

from graphopt.fused import DOMAIN, DOMAIN_VERSION

ELEM = {torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16,
        torch.bfloat16: TensorProto.BFLOAT16, torch.uint8: TensorProto.UINT8}  # fmt: skip
OPSET = 21  # Gelu (with approximate="tanh") is opset 20


def _model(nodes, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor], domain=False):
    def info(name, t):
        return helper.make_tensor_value_info(name, ELEM[t.dtype], list(t.shape))

    graph = helper.make_graph(
        nodes, "widths", [info(n, t) for n, t in inputs.items()], [info(n, t) for n, t in outputs.items()]
    )
    opsets = [helper.make_opsetid("", OPSET)] + (
        [helper.make_opsetid(DOMAIN, DOMAIN_VERSION)] if domain else []
    )
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _trim(names: list[str]) -> list[str]:
    while names and not names[-1]:
        names.pop()
    return names


def fused_model(case, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor]) -> onnx.ModelProto:
    """One graphopt node; ``inputs`` keyed x, scale, bias, weight, linear_bias, residual (those
    present), ``outputs`` y and sum (with a residual)."""
    ports = ["x", "scale", "bias", "weight", "linear_bias", "residual"] if case.linear else [
        "x", "scale", "bias", "residual"]  # fmt: skip
    attrs = {"norm": "layer", "activation": case.activation, "epsilon": case.eps}
    if case.linear:
        attrs["out_activation"] = "identity"
    else:
        attrs["axis"] = -1
    node = helper.make_node(
        "NormActLinear" if case.linear else "NormAct",
        _trim([p if p in inputs else "" for p in ports]), list(outputs), domain=DOMAIN, **attrs,
    )  # fmt: skip
    return _model([node], inputs, outputs, domain=True)


def _activation_nodes(activation: str, h: str, y: str, form: int) -> list | None:
    """ONNX nodes computing ``activation`` of ``h`` into ``y``; ``form`` picks among spellings
    (None: no more): GELU first as the opset-20 op, then as the formula that ORT's optimizer fuses
    into its own kernel (erf: Gelu, tanh: FastGelu), for a build whose CUDA EP lacks the former in a
    dtype."""
    simple = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid"}
    if form > 0 and activation not in ("gelu", "gelu_tanh"):
        return None
    if activation in simple:
        return [helper.make_node(simple[activation], [h], [y])]
    if activation == "silu":  # (ORT's optimizer fuses x * sigmoid(x) into its QuickGelu kernel)
        return [helper.make_node("Sigmoid", [h], ["sig"]), helper.make_node("Mul", [h, "sig"], [y])]
    approximate = "tanh" if activation == "gelu_tanh" else "none"
    if form == 0:
        return [helper.make_node("Gelu", [h], [y], approximate=approximate)]
    if form == 1 and activation == "gelu":
        const = [helper.make_node("Constant", [], [n], value_float=v)
                 for n, v in (("sqrt2", math.sqrt(2.0)), ("one", 1.0), ("half", 0.5))]  # fmt: skip
        return [*const,
                helper.make_node("CastLike", ["sqrt2", h], ["sqrt2_t"]),
                helper.make_node("CastLike", ["one", h], ["one_t"]),
                helper.make_node("CastLike", ["half", h], ["half_t"]),
                helper.make_node("Div", [h, "sqrt2_t"], ["g0"]), helper.make_node("Erf", ["g0"], ["g1"]),
                helper.make_node("Add", ["g1", "one_t"], ["g2"]), helper.make_node("Mul", [h, "g2"], ["g3"]),
                helper.make_node("Mul", ["g3", "half_t"], [y])]  # fmt: skip
    if form == 1 and activation == "gelu_tanh":  # (fused by ORT's optimizer into FastGelu)
        values = (("c", math.sqrt(2 / math.pi)), ("k", 0.044715), ("one", 1.0), ("half", 0.5))
        const = [helper.make_node("Constant", [], [n], value_float=v) for n, v in values]
        like = [helper.make_node("CastLike", [n, h], [f"{n}_t"]) for n in ("c", "k", "one", "half")]
        return [*const, *like,
                helper.make_node("Mul", [h, h], ["t0"]), helper.make_node("Mul", ["t0", h], ["t1"]),
                helper.make_node("Mul", ["t1", "k_t"], ["t2"]), helper.make_node("Add", [h, "t2"], ["t3"]),
                helper.make_node("Mul", ["t3", "c_t"], ["t4"]), helper.make_node("Tanh", ["t4"], ["t5"]),
                helper.make_node("Add", ["t5", "one_t"], ["t6"]), helper.make_node("Mul", [h, "t6"], ["t7"]),
                helper.make_node("Mul", ["t7", "half_t"], [y])]  # fmt: skip
    return None


def native_models(case, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor]):
    """ONNX Runtime's own ops for the case, one model per spelling of its activation (the caller
    takes the first that its CUDA EP runs whole). ``inputs`` as for ``fused_model`` plus ``ones``
    (LayerNormalization's Scale is not optional) and ``weight_t`` ([D, K], MatMul's layout)."""
    form = 0
    while True:
        nodes, src = [], "x"
        if "residual" in inputs:
            nodes.append(helper.make_node("Add", ["x", "residual"], ["sum"]))
            src = "sum"
        norm_in = [src, "scale" if "scale" in inputs else "ones"] + (["bias"] if "bias" in inputs else [])
        activated = "a" if case.linear else "y"
        if case.activation == "identity":  # (the norm writes the result: no copy node)
            if form > 0:
                return
            nodes.append(
                helper.make_node("LayerNormalization", norm_in, [activated], axis=-1, epsilon=case.eps)
            )
        else:
            nodes.append(helper.make_node("LayerNormalization", norm_in, ["h"], axis=-1, epsilon=case.eps))
            act = _activation_nodes(case.activation, "h", activated, form)
            if act is None:
                return
            nodes += act
        if case.linear:
            nodes += [helper.make_node("MatMul", ["a", "weight_t"], ["mm"]),
                      helper.make_node("Add", ["mm", "linear_bias"], ["y"])]  # fmt: skip
        used = {n for node in nodes for n in node.input}
        yield _model(nodes, {k: v for k, v in inputs.items() if k in used}, outputs)
        form += 1


def identity_model(buffer: torch.Tensor) -> onnx.ModelProto:
    """ONNX Runtime's own copy: Identity from one bound buffer into another."""
    return _model([helper.make_node("Identity", ["x"], ["y"])], {"x": buffer}, {"y": buffer})


class OrtRunner:
    """Sessions on the CUDA EP (on ``stream``) or, without a GPU, the CPU EP."""

    def __init__(self, gpu: bool, stream=None):
        import onnxruntime as ort

        self.ort, self.gpu, self.stream = ort, gpu, stream
        if gpu and "CUDAExecutionProvider" not in ort.get_available_providers():
            raise RuntimeError("onnxruntime has no CUDA execution provider here (install onnxruntime-gpu)")
        self.run_options = ort.RunOptions()
        # The caller synchronizes; a synchronize inside a run could not be captured in a graph.
        self.run_options.add_run_config_entry("disable_synchronize_execution_providers", "1")

    @property
    def provider(self) -> str:
        return "CUDAExecutionProvider" if self.gpu else "CPUExecutionProvider"

    def session(self, model: onnx.ModelProto, with_library: bool):
        options = self.ort.SessionOptions()
        options.log_severity_level = 3
        if with_library:
            from graphopt.ort import library_path

            options.register_custom_ops_library(library_path())
        if not self.gpu:
            return self.ort.InferenceSession(model.SerializeToString(), options, providers=[self.provider])
        # A node left to the CPU would time copies and host work, not ONNX Runtime's CUDA kernels:
        # session creation fails instead, and the caller tries another spelling or reports it.
        options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        cuda = {
            "device_id": str(torch.cuda.current_device()),
            "user_compute_stream": str(self.stream.cuda_stream),
            "arena_extend_strategy": "kSameAsRequested",
        }
        return self.ort.InferenceSession(
            model.SerializeToString(), options, providers=[(self.provider, cuda)]
        )

    def calls(
        self, session, feeds: Sequence[dict[str, torch.Tensor]], outputs: Sequence[dict[str, torch.Tensor]]
    ) -> list[Callable[[], tuple]]:
        """One call per (feeds, outputs) pair, each with its own binding, returning its outputs."""
        wanted = {i.name for i in session.get_inputs()}
        result = []
        for feed, out in zip(feeds, outputs, strict=True):
            binding = session.io_binding()
            for name, t in feed.items():
                if name in wanted:
                    binding.bind_input(name, t.device.type, t.device.index or 0, ELEM[t.dtype],
                                       list(t.shape), t.data_ptr())  # fmt: skip
            for name, t in out.items():
                binding.bind_output(name, t.device.type, t.device.index or 0, ELEM[t.dtype],
                                    list(t.shape), t.data_ptr())  # fmt: skip
            values = tuple(out.values())

            def call(binding=binding, values=values):
                session.run_with_iobinding(binding, self.run_options)
                return values

            result.append(call)
        return result
