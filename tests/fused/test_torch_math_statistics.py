"""Layer norm statistics of the plain-PyTorch (CPU) implementation on rows the fuzzing of damaged
weights found (split_stack.pt2, fuzz cases 1045, 5378, 6584, 8081): the same rows as the C++
kernel's (tests/ort/test_ort_norm_act_statistics.py)."""

import numpy as np
import torch

from graphopt.fused import register_torch_ops

ops = register_torch_ops()

# A value 0.1 above its row's mean, the row's first element 3e6 (see the C++ kernel's test).
FAR_FIRST = torch.tensor(
    [3000000.0, 189.05337524414062, -522.7484130859375, -413.06353759765625, -2441.46728515625,
     1799.7073974609375, 1144.1658935546875, 428536.625],
)  # fmt: skip


def _layer_norm(x: torch.Tensor, scale: torch.Tensor) -> np.ndarray:
    x = x.double().numpy()
    centered = x - x.mean(axis=-1, keepdims=True)
    return centered / np.sqrt((centered**2).mean(axis=-1, keepdims=True) + 1e-5) * scale.double().numpy()


def test_a_value_near_the_mean_of_a_row_whose_first_element_is_far_keeps_its_sign():
    scale = torch.ones(8)
    scale[7] = -torch.inf
    y = ops.norm_act(FAR_FIRST[None, :], scale, None, "layer", "tanh", 1e-5, -1)
    assert y[0, 7].item() == -1.0
    expected = np.tanh(_layer_norm(FAR_FIRST, torch.ones(8))[:7])
    np.testing.assert_allclose(y[0, :7].numpy(), expected, rtol=1e-6)


def test_squares_beyond_float32s_top_leave_a_finite_variance():
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32))
    x[:, 5] = 5e36
    scale = torch.linspace(0.5, 1.5, 16)
    y = ops.norm_act(x, scale, None, "layer", "identity", 1e-5, -1)
    np.testing.assert_allclose(y.numpy(), _layer_norm(x, scale), rtol=1e-5, atol=1e-6)
