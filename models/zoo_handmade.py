"""Zoo entries built with `onnx.helper`: subgraphs and ModelProto features exporters rarely emit."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from models import zoo_features as features
from models import zoo_subgraphs as subgraphs
from models.onnx_build import OPSET, floats
from models.zoo_entry import ZooEntry


def _x(*shape: int) -> Callable[[], dict[str, np.ndarray]]:
    return lambda: {"x": floats(*shape, seed=1)}


def _entry(name: str, make, inputs, expected, *tags: str, saver=None) -> ZooEntry:
    return ZooEntry(
        f"{name}.helper", make, inputs, frozenset({"onnx", "helper", f"opset{OPSET}", *tags}), expected, saver
    )


def entries() -> list[ZooEntry]:
    return [
        _entry(
            "if_outer_scope",
            subgraphs.if_outer_scope,
            subgraphs.if_outer_scope_inputs,
            subgraphs.if_outer_scope_expected,
            "control_flow",
            "if",
            "subgraph",
            "outer_scope",
        ),
        _entry(
            "loop_outer_scope",
            subgraphs.loop_outer_scope,
            subgraphs.loop_outer_scope_inputs,
            subgraphs.loop_outer_scope_expected,
            "control_flow",
            "loop",
            "subgraph",
            "outer_scope",
            "multi_output",
        ),
        _entry(
            "nested_if_in_loop",
            subgraphs.nested_if_in_loop,
            subgraphs.nested_if_in_loop_inputs,
            subgraphs.nested_if_in_loop_expected,
            "control_flow",
            "loop",
            "if",
            "subgraph",
            "outer_scope",
            "nested_subgraph",
        ),
        _entry(
            "scan_outer_scope",
            subgraphs.scan_outer_scope,
            subgraphs.scan_outer_scope_inputs,
            subgraphs.scan_outer_scope_expected,
            "control_flow",
            "scan",
            "subgraph",
            "outer_scope",
            "multi_output",
        ),
        _entry(
            "local_functions",
            features.local_functions,
            _x(2, 4),
            features.local_functions_expected,
            "function",
            "custom_domain",
        ),
        _entry(
            "metadata_and_docs",
            features.metadata_and_docs,
            _x(2, 4),
            lambda: [-np.maximum(floats(2, 4, seed=1), 0)],
            "metadata",
            "doc_string",
        ),
        _entry(
            "value_info", features.value_info, _x(3, 8), None, "value_info", "dynamic", "layer_norm", "tanh"
        ),
        _entry(
            "multiple_outputs",
            features.multiple_outputs,
            _x(2, 4),
            features.multiple_outputs_expected,
            "multi_output",
            "split",
            "graph_input_as_output",
        ),
        _entry(
            "initializer_as_input",
            features.initializer_as_input,
            _x(2, 4),
            lambda: [floats(2, 4, seed=1) @ floats(4, 3, seed=2)],
            "initializer_input",
        ),
        _entry(
            "external_data",
            features.external_data,
            _x(2, 64),
            None,
            "external_data",
            saver=lambda built, directory: features.save_external_data(
                built, directory, "external_data.helper"
            ),
        ),
        _entry(
            "extra_domains",
            features.extra_domains,
            _x(2, 4),
            features.extra_domains_expected,
            "custom_domain",
            "contrib_op",
            "ml_domain",
        ),
    ]
