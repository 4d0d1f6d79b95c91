"""AffineAct: Y = act(X * Scale + Bias), Scale and Bias broadcast along one channel axis.

One fused op in one folder: ``spec`` (the op and its float64 reference), ``decompose`` (the ONNX
fallback body), ``torch_impl`` (the torch op: CPU math, CUDA launch, fake), ``triton_kernel`` (the
kernel and its launcher) and ``ort_kernel.cc`` (the ONNX Runtime CPU kernel). It serves a linear
layer's bias + activation (``axis=-1``) and an inference batch norm with nothing to fold into,
followed by its activation (``axis=1``).

Importing this package imports nothing heavy.
"""
