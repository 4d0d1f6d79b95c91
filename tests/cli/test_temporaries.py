"""A run stopped while it writes leaves nothing behind: SIGTERM unwinds like Ctrl-C, and what a killed
run left (SIGKILL) is removed by the next run that writes into the folder."""

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from cli_run import graphopt
from written_files import external_weights_model

from graphopt.files.atomic import remove_stale_temporaries

# Runs the command line with a signal sent to itself once the model's bytes are written to their
# temporary file (at the fsync before the rename; --no-verify: the check has nothing to sync).
SIGNAL_WHILE_WRITING = textwrap.dedent(
    """
    import os, signal, sys
    real_fsync, chosen = os.fsync, getattr(signal, sys.argv[1])
    def fsync(fd):
        os.kill(os.getpid(), chosen)
        real_fsync(fd)
    os.fsync = fsync
    from graphopt.cli import main
    sys.argv = ["graphopt", *sys.argv[2:]]
    main()
    """
)


def write_with_signal(signal_name: str, *args) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", SIGNAL_WHILE_WRITING, signal_name, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_sigterm_while_writing_removes_the_temporaries(tmp_path):
    model = external_weights_model(tmp_path)
    out = tmp_path / "out"
    result = write_with_signal("SIGTERM", "optimize", model, "-o", out / "m.onnx", "--no-verify")
    assert result.returncode == 143, result.stderr
    assert result.stderr.strip() == "graphopt: terminated; nothing written"
    assert list(out.iterdir()) == []


def test_a_later_run_removes_what_a_killed_run_left(tmp_path):
    model = external_weights_model(tmp_path)
    out = tmp_path / "out"
    killed = write_with_signal("SIGKILL", "optimize", model, "-o", out / "m.onnx", "--no-verify")
    assert killed.returncode == -9
    left = sorted(p.name for p in out.iterdir())
    assert left and all(".graphopt-" in name and name.endswith(".tmp") for name in left)
    assert graphopt("optimize", model, "-o", out / "m.onnx").returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["m.onnx", "m.onnx.data"]


def test_only_temporaries_of_dead_processes_on_this_host_are_removed(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead, alive = int(done.stdout), os.getpid()
    host = socket.gethostname().replace(".", "-")
    names = {
        "dead": f".m.onnx.graphopt-{dead}-{host}-0123abcd.tmp",
        "alive": f".m.onnx.graphopt-{alive}-{host}-0123abcd.tmp",
        "elsewhere": f".m.onnx.graphopt-{dead}-another-host-0123abcd.tmp",
        "not ours": f".m.onnx.{dead}.tmp",
    }
    for name in names.values():
        (tmp_path / name).write_text("")
    assert remove_stale_temporaries(tmp_path) == [tmp_path / names["dead"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for k, n in names.items() if k != "dead")


def test_temporaries_are_named_for_their_process(tmp_path):
    from graphopt.files.atomic import temp_beside

    temp = temp_beside(tmp_path / "m.onnx")
    assert temp.parent == tmp_path and temp.name.startswith(f".m.onnx.graphopt-{os.getpid()}-")
    assert remove_stale_temporaries(tmp_path) == []  # (ours, and this process lives)
    assert Path(temp).exists()
