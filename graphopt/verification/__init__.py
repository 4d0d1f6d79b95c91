"""Never different, never slower: the checks an optimized model passes before it is written.

``checking`` runs the original once on each draw of inputs (``draws``, or a ``.npz`` file through
``npz_inputs``) and compares every candidate with per-dtype tolerances (``numeric``); ``bisection``
finds the rewrite that changed the outputs; ``compare`` checks two model files (``graphopt verify``);
``speed_guard`` times the original and the optimized model on the device.
"""
