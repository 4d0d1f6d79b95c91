import os
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the example models live in models/, beside the package

# Kernel tests run the Triton kernels through Triton's interpreter where no GPU is present; the
# variable must be set before any module defining a kernel is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """Each test starts with autograd on and leaves it as it found it: an exported program that raises
    inside its no_grad region (a ``wrap_with_set_grad_enabled`` call) leaves autograd off, and a later
    torch.onnx.export of nn.TransformerEncoderLayer then takes its fused inference path, which the
    exporter cannot write."""
    enabled = torch.is_grad_enabled()
    yield
    torch.set_grad_enabled(enabled)
