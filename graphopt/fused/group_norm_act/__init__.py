"""GroupNormAct: Y = act(group_norm(X [+ Residual]) * Scale + Bias) over [N, C, *] tensors.

One folder holds what is specific to the op: its spec and float64 reference (``spec``), its ONNX
fallback body (``decompose``), its torch ops (``torch_impl``), its Triton kernel
(``triton_kernel``) and its ONNX Runtime CPU kernel (``ort_kernel.cc``).
"""
