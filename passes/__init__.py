"""graphopt's passes, one per file (installed as ``graphopt.passes``)."""
