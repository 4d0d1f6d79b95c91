"""``python -m graphopt.benchmark MODEL.pt2``: the side-by-side benchmark without the CLI's dependencies."""

from __future__ import annotations

import argparse
import datetime
import logging
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphopt bench", description=__doc__)
    parser.add_argument("model", type=Path, help="a torch.export archive (.pt2)")
    parser.add_argument(
        "--out", type=Path, default=Path("bench/results"), help="folder for JSON, text and PNG"
    )
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes a while)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return run_command(args.model, args.out, args.iters, not args.no_compile)


def run_command(model: Path, out: Path, iters: int, with_compile: bool) -> int:
    import torch

    from graphopt.errors import BadInput
    from graphopt.frontends.torch_export import load_pt2

    from .compare import run
    from .output import table, write

    if not torch.cuda.is_available():
        raise BadInput(
            "graphopt bench measures GPU runtimes and found no CUDA device; run it on a GPU machine"
        )
    if model.suffix != ".pt2":
        raise BadInput(
            f"{model}: graphopt bench takes a torch.export archive (.pt2), so eager PyTorch can run it"
        )
    program = load_pt2(model)
    result = run(program, iters=iters, compile_modes=("default", "reduce-overhead") if with_compile else ())
    result["model"] = model.name
    result["date"] = datetime.date.today().isoformat()
    print(table(result))
    for path in write(result, out, f"bench_{model.stem}"):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
