"""The activation ops a fused op absorbs, and the ``Activation`` each one computes.

Not a pass: what ``fuse_norm_act`` and ``fuse_norm_act_linear`` both match.
"""

from __future__ import annotations

from graphopt.fused import Activation
from graphopt.ir import Node, Op

_BY_OP = {
    Op.RELU: Activation.RELU,
    Op.TANH: Activation.TANH,
    Op.SILU: Activation.SILU,
    Op.SIGMOID: Activation.SIGMOID,
}

# (GELU is two activations, by its ``approximate`` attribute)
ACTIVATION_OPS = (*_BY_OP, Op.GELU)


def activation_of(node: Node) -> Activation:
    if node.op == Op.GELU:
        return Activation.GELU_TANH if node.attrs.get("approximate") == "tanh" else Activation.GELU
    return _BY_OP[node.op]
