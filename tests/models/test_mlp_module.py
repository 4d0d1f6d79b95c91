import pytest
import torch
from torch import nn

from models.mlp import MLP, example_inputs, make_mlp


@pytest.mark.parametrize(
    ("config", "norm", "act"),
    [({}, nn.LayerNorm, nn.GELU), ({"norm": "rms", "act": "silu"}, nn.RMSNorm, nn.SiLU)],
)
def test_blocks_hold_the_requested_norm_and_activation(config, norm, act):
    model = make_mlp(**config)
    assert all(isinstance(b.norm, norm) and isinstance(b.act, act) for b in model.blocks)


def test_residual_adds_the_block_input_before_the_norm():
    plain, residual = make_mlp(seed=3), make_mlp(seed=3, residual=True)
    block_p, block_r = plain.blocks[0], residual.blocks[0]
    x = torch.randn(2, 32)
    with torch.no_grad():
        torch.testing.assert_close(block_r(x), block_p.act(block_p.norm(block_p.linear(x) + x)))


def test_seeded_weights_and_shape():
    a, b = make_mlp(seed=5), make_mlp(seed=5)
    (x,) = example_inputs()
    with torch.no_grad():
        torch.testing.assert_close(a(x), b(x), rtol=0, atol=0)
    assert a(x).shape == (4, 8)
    assert not a.training


def test_depth_and_widths():
    model = MLP(d_in=3, hidden=6, d_out=2, depth=4)
    assert len(model.blocks) == 4
    assert model(torch.zeros(1, 3)).shape == (1, 2)
