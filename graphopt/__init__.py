"""graphopt: a graph-rewriting optimizer for exported model graphs."""

__version__ = "0.1.0"
