"""``graphopt bench``: the original and the optimized model, side by side, in every runtime at hand."""
