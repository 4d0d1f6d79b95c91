"""Fuzzing the loaders and the command line with damaged .onnx and .pt2 files.

    python bench/fuzz_loaders.py --count 10000          # both cores; figures in bench/results/
    python bench/fuzz_loaders.py --replay 4711           # one case again, with its output shown

Case i mutates one file of a small corpus (the bundled models, random programs in both forms, a model
with external weights) with ``random.Random(i)`` (models/mutations.py) and runs ``graphopt optimize``
on it, or (one case in five) ``graphopt verify`` of the intact file against it. What must hold:

* no crash, hang or traceback: the process lives, the command returns in time, with exit code 0 or 2
  for optimize (1 would be a wrong optimization of a damaged but valid model), 0, 1 or 2 for verify;
* exit code 2 comes with exactly one line on stderr, ``graphopt: error: ...``;
* a failed command writes nothing (the case's folder holds what it held before);
* a successful optimize writes a model.

Cases run inside long-lived worker processes (the command line called in-process, stderr captured at
the file-descriptor level) so that 10,000 of them take minutes; a worker that dies or hangs is a
failure of the case it was running, and is replaced. Every 100th case also runs as a real
``python -m graphopt.cli`` process, whose exit code must agree.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import select
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
CASE_SECONDS = 120
CASES_PER_WORKER = 400  # then a fresh worker (no state or memory carried further)
SUBPROCESS_EVERY = 100
MEMORY_LIMIT = 12 << 30  # address space per worker: a memory bomb fails an allocation, not the machine

# -- the corpus ----------------------------------------------------------------------------------


def build_corpus(folder: Path, onnx_programs: int = 6, torch_programs: int = 3) -> list[dict]:
    """Valid files to mutate: [{"name", "kind": "onnx"|"pt2", "path", "data"?}]."""
    sys.path.insert(0, str(REPO))
    import warnings

    import onnx
    import torch

    from models import bad_inputs
    from models.random_onnx import to_onnx
    from models.random_program import SeededChoices, draw_program
    from models.random_torch import to_exported_program

    folder.mkdir(parents=True, exist_ok=True)
    corpus = []

    def add(name: str, kind: str, data: bytes, extra: dict | None = None) -> None:
        path = folder / f"{name}.{kind}"
        path.write_bytes(data)
        corpus.append({"name": name, "kind": kind, "path": str(path), **(extra or {})})

    add("split_stack", "onnx", (REPO / "models" / "split_stack.onnx").read_bytes())
    add("mlp", "onnx", (REPO / "models" / "mlp.onnx").read_bytes())
    add("matmul_relu", "onnx", bad_inputs.valid_model_bytes())
    for seed in range(onnx_programs):
        add(f"random_{seed}", "onnx", to_onnx(draw_program(SeededChoices(seed))).SerializeToString())
    external = onnx.load_from_string(bad_inputs.valid_model_bytes())
    onnx.save(
        external, str(folder / "external.onnx"), save_as_external_data=True, location="external.onnx.data"
    )
    weights = folder / "external.onnx.data"
    add("external", "onnx", (folder / "external.onnx").read_bytes(), {"data": str(weights)})
    add("split_stack", "pt2", (REPO / "models" / "split_stack.pt2").read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(torch_programs):
            program = to_exported_program(draw_program(SeededChoices(seed), torch_form=True))
            buffer = folder / f"random_{seed}.tmp.pt2"
            torch.export.save(program, buffer)
            add(f"random_{seed}", "pt2", buffer.read_bytes())
            buffer.unlink()
    assert weights.stat().st_size > 0
    return corpus


# -- one case ------------------------------------------------------------------------------------


def make_case(case: int, corpus: list[dict], folder: Path) -> dict:
    """Writes case ``case``'s damaged file into ``folder``; returns what it is and the command."""
    from models.mutations import mutate_onnx, mutate_pt2

    rng = random.Random(case)
    source = corpus[rng.randrange(len(corpus))]
    original = Path(source["path"]).read_bytes()
    mutate = mutate_onnx if source["kind"] == "onnx" else mutate_pt2
    data, how = mutate(original, rng)
    path = folder / f"case.{source['kind']}"
    path.write_bytes(data)
    if "data" in source:  # the external weights travel with the model (and are damaged sometimes)
        weights = Path(source["data"]).read_bytes()
        if rng.random() < 0.2:
            weights = weights[: rng.randrange(len(weights))]
            how += f"; external data truncated to {len(weights)} bytes"
        (folder / Path(source["data"]).name).write_bytes(weights)
    if rng.random() < 0.2:
        command = ["verify", source["path"], str(path)]
    else:
        command = ["optimize", str(path), "-o", str(folder / f"out.{source['kind']}"), "--quiet"]
    return {"case": case, "source": f"{source['name']}.{source['kind']}", "mutation": how, "command": command}


def judge(command: list[str], code: int, stderr: str, before: set[str], after: set[str]) -> str | None:
    """What is wrong with how the command ended, or None."""
    allowed = {0, 2} if command[0] == "optimize" else {0, 1, 2}
    if "Traceback" in stderr:
        return f"traceback on stderr (exit {code})"
    if code not in allowed:
        lines = stderr.strip().splitlines()
        return f"exit code {code}: {lines[-1] if lines else ''}"[:400]
    if code == 2:
        lines = stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("graphopt: error: "):
            return f"exit 2 without one error line: {stderr.strip()[:400]!r}"
    if code != 0 and after != before:
        return f"wrote {sorted(after - before)} and exited {code}"
    if code == 0 and command[0] == "optimize":
        output = Path(command[command.index("-o") + 1]).name
        if after - before not in ({output}, {output, f"{output}.data"}):
            return f"exit 0 but the files written are {sorted(after - before)}"
    return None


def run_in_process(command: list[str]) -> tuple[int, str]:
    """The command line's exit code and stderr: what Python writes there and what native code writes
    to file descriptor 2 (ONNX Runtime's or torch's own log lines count too)."""
    import logging

    from graphopt.cli import app

    for handler in logging.root.handlers[:]:  # (the command configures logging afresh, on this stderr)
        logging.root.removeHandler(handler)
    sys.stderr.flush()
    sys.stdout.flush()
    saved = sys.stderr, sys.stdout
    with tempfile.TemporaryFile() as captured, open(os.devnull, "wb") as null:
        saved_err, saved_out = os.dup(2), os.dup(1)
        os.dup2(captured.fileno(), 2)
        os.dup2(null.fileno(), 1)
        sys.stderr = open(2, "w", closefd=False, encoding="utf-8", errors="replace")  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False, encoding="utf-8", errors="replace")  # noqa: SIM115
        try:
            try:
                code = app(command, prog_name="graphopt", standalone_mode=False)
                code = code if isinstance(code, int) else 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
            except BaseException:
                import traceback

                traceback.print_exc()
                code = -1
        finally:
            sys.stderr.flush()
            sys.stdout.flush()
            sys.stderr, sys.stdout = saved
            os.dup2(saved_err, 2)
            os.dup2(saved_out, 1)
            os.close(saved_err)
            os.close(saved_out)
            for handler in logging.root.handlers[:]:
                logging.root.removeHandler(handler)
        captured.seek(0)
        return code, captured.read().decode("utf-8", errors="replace")


def run_case(case: int, corpus: list[dict], work: Path, subprocess_check: bool = False) -> dict:
    folder = work / f"case{case}"
    folder.mkdir(parents=True)
    try:
        info = make_case(case, corpus, folder)
        before = set(os.listdir(folder))
        code, stderr = run_in_process(info["command"])
        after = set(os.listdir(folder))
        info.update(code=code, problem=judge(info["command"], code, stderr, before, after))
        if subprocess_check and info["problem"] is None:
            for name in after - before:
                (folder / name).unlink()
            done = subprocess.run(
                [sys.executable, "-m", "graphopt.cli", *info["command"]],
                capture_output=True,
                text=True,
                timeout=CASE_SECONDS,
                cwd=REPO,
            )
            if done.returncode != code:
                info["problem"] = f"in-process exit {code} but a real process exits {done.returncode}"
            else:
                info["problem"] = judge(
                    info["command"], done.returncode, done.stderr, before, set(os.listdir(folder))
                )
        info["stderr"] = stderr.strip()[-300:]
        return info
    finally:
        for path in sorted(folder.glob("*")):
            path.unlink()
        folder.rmdir()


# -- workers -------------------------------------------------------------------------------------


def worker(corpus_file: Path) -> None:
    """Reads case numbers on stdin, answers one JSON line per case on stdout."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    sys.path.insert(0, str(REPO))
    corpus = json.loads(corpus_file.read_text())
    answers = os.fdopen(os.dup(1), "w")
    with tempfile.TemporaryDirectory(prefix="graphopt-fuzz-") as work:
        for line in sys.stdin:
            case = int(line)
            result = run_case(case, corpus, Path(work), subprocess_check=case % SUBPROCESS_EVERY == 0)
            answers.write(json.dumps(result) + "\n")
            answers.flush()


class Worker:
    def __init__(self, corpus_file: Path):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(corpus_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=REPO,
        )
        self.case: int | None = None
        self.started = 0.0
        self.done = 0

    def give(self, case: int) -> None:
        self.case, self.started = case, time.monotonic()
        self.process.stdin.write(f"{case}\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()


def fuzz(cases: list[int], workers: int, corpus_file: Path, on_result) -> None:
    pending = list(reversed(cases))
    pool = [Worker(corpus_file) for _ in range(min(workers, len(cases)))]
    while pool:
        for w in pool[:]:
            if w.case is None:
                if not pending or w.done >= CASES_PER_WORKER:
                    w.stop()
                    pool.remove(w)
                    if pending:
                        pool.append(Worker(corpus_file))
                    continue
                w.give(pending.pop())
        streams = {w.process.stdout: w for w in pool if w.case is not None}
        if not streams:
            continue
        ready, _, _ = select.select(list(streams), [], [], 1.0)
        for stream in ready:
            w = streams[stream]
            line = stream.readline()
            if line:
                on_result(json.loads(line))
                w.case, w.done = None, w.done + 1
            else:  # the worker died in the middle of its case
                code = w.process.wait()
                on_result({"case": w.case, "problem": f"crash: the process ended with {code}"})
                pool.remove(w)
                pool.append(Worker(corpus_file))
        for w in pool[:]:
            if w.case is not None and time.monotonic() - w.started > CASE_SECONDS:
                w.stop()
                on_result({"case": w.case, "problem": f"hang: no answer in {CASE_SECONDS} s"})
                pool.remove(w)
                pool.append(Worker(corpus_file))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--replay", type=int, default=None, help="run one case here and show it")
    parser.add_argument("--out", type=Path, default=RESULTS / "fuzz_loaders.json")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args.worker)
        return 0
    with tempfile.TemporaryDirectory(prefix="graphopt-fuzz-corpus-") as folder:
        corpus = build_corpus(Path(folder))
        corpus_file = Path(folder) / "corpus.json"
        corpus_file.write_text(json.dumps(corpus))
        if args.replay is not None:
            result = run_case(args.replay, corpus, Path(folder) / "replay", subprocess_check=True)
            print(json.dumps(result, indent=2))
            return 1 if result["problem"] else 0
        return _long_run(args, corpus, corpus_file)


def _long_run(args, corpus: list[dict], corpus_file: Path) -> int:
    started = time.perf_counter()
    outcomes, sources, failures = Counter(), Counter(), []
    seen = 0

    def on_result(result: dict) -> None:
        nonlocal seen
        seen += 1
        sources[result.get("source", "?")] += 1
        if result.get("problem"):
            failures.append(result)
            print(f"case {result['case']}: {result['problem']} ({result.get('mutation', '')})", flush=True)
        else:
            outcomes[f"{result['command'][0]} exit {result['code']}"] += 1
        if seen % 500 == 0:
            rate = seen / (time.perf_counter() - started)
            print(f"{seen}/{args.count} cases, {len(failures)} failures, {rate:.1f} cases/s", flush=True)

    fuzz(list(range(args.start, args.start + args.count)), args.workers, corpus_file, on_result)
    seconds = time.perf_counter() - started
    record = {
        "what": "damaged .onnx/.pt2 files through graphopt optimize/verify: no crash, hang or traceback; "
        "exit 2 with one error line; nothing written on failure",
        "cases": [args.start, args.start + args.count - 1],
        "ran": seen,
        "failures": len(failures),
        "failed": sorted(failures, key=lambda f: f["case"]),
        "outcomes": dict(sorted(outcomes.items())),
        "by_source": dict(sorted(sources.items())),
        "corpus": [f"{c['name']}.{c['kind']}" for c in corpus],
        "seconds": round(seconds, 1),
        "cases_per_second": round(seen / seconds, 2),
        "workers": args.workers,
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"{seen} cases, {len(failures)} failures, {seconds:.0f} s; wrote {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
