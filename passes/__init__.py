"""graphopt's passes, one per file, grouped by stage (installed as ``graphopt.passes``).

In pipeline order: ``canonicalize`` (one form per op, constants folded, duplicates merged),
``recognize`` (spelled-out norms, activations, stacks and linear layers become single ops),
``horizontal`` (N identical chains become one batched chain) and ``fuse`` (norm → activation
(→ linear) becomes one fused kernel). ``graphopt/pipeline.py`` holds the exact order, which
interleaves the stages where one needs another's result. Importing a pass registers nothing.
"""
