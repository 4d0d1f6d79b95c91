"""On a CPU the fused ops compute what the native ops they replace compute, also on the rows the
fuzzing of damaged weights found (split_stack.pt2, fuzz cases 1045, 5378, 6584, 8081), where a more
exact statistic than the original's made the optimized program differ from it."""

import numpy as np
import torch
import torch.nn.functional as F

from graphopt.fused import register_torch_ops

ops = register_torch_ops()

# A value 0.1 above its row's mean, the row's first element 3e6.
FAR_FIRST = torch.tensor(
    [3000000.0, 189.05337524414062, -522.7484130859375, -413.06353759765625, -2441.46728515625,
     1799.7073974609375, 1144.1658935546875, 428536.625],
)  # fmt: skip


def test_a_row_whose_first_element_is_far_gives_what_layer_norm_and_tanh_give():
    scale = torch.ones(8)
    scale[7] = -torch.inf
    y = ops.norm_act(FAR_FIRST[None, :], scale, None, "layer", "tanh", 1e-5, -1)
    assert torch.equal(y, torch.tanh(F.layer_norm(FAR_FIRST[None, :], (8,), scale, None, 1e-5)))


def test_squares_beyond_float32s_top_give_what_layer_norm_gives():
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32))
    x[:, 5] = 5e36
    scale = torch.linspace(0.5, 1.5, 16)
    y = ops.norm_act(x, scale, None, "layer", "identity", 1e-5, -1)
    torch.testing.assert_close(y, F.layer_norm(x, (16,), scale, None, 1e-5), rtol=0, atol=0, equal_nan=True)
