import os
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the example models live in models/, beside the package

# Kernel tests run the Triton kernels through Triton's interpreter where no GPU is present; the
# variable must be set before any module defining a kernel is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
