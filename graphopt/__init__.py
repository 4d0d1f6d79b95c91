"""graphopt: a graph-rewriting optimizer for exported model graphs.

    import graphopt
    optimized, report = graphopt.optimize("model.onnx", output="model.opt.onnx")
"""

from .api import Optimized, optimize
from .errors import BadInput, VerificationError

__version__ = "0.1.0"

__all__ = ["BadInput", "Optimized", "VerificationError", "__version__", "optimize"]
