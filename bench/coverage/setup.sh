#!/usr/bin/env bash
# Creates .venv-coverage/: the coverage run's own environment (torch 2.14.1 + torchvision 0.29.1, the pair
# that imports together from PyPI; transformers, diffusers; graphopt installed editable with onnxruntime,
# its ORT library built in a build directory of its own so the project's .venv is untouched).
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv-coverage}
PYTHON=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q torch==2.14.1 torchvision==0.29.1
"$VENV/bin/python" -m pip install -q transformers diffusers matplotlib "scikit-build-core>=0.10" "triton>=3.2"
# GRAPHOPT_BUILD_ORT=0 skips the C++ custom-op library if it does not build here; fused ops then run in ONNX
# Runtime through their model-local functions.
GRAPHOPT_ORT_CUDA=${GRAPHOPT_ORT_CUDA:-0} "$VENV/bin/python" -m pip install -q --no-build-isolation \
  -C build-dir=build/coverage -e ".[cpu]"
"$VENV/bin/python" -c "import graphopt, torchvision, transformers, diffusers, onnxruntime; print('coverage environment ready')"
