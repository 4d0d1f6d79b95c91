"""A .pt2 archive that would unpickle objects is refused before torch.export.load reads it (a planted
pickle would otherwise run: here it creates a marker file), on every command that loads a model."""

import pytest
from cli_run import assert_bad_input, graphopt, graphopt_process
from planted_pickles import PLANTED, save_clean

import graphopt as api
from graphopt.errors import BadInput

COMMANDS = {
    "optimize": lambda archive, folder: ["optimize", archive, "-o", folder / "out.pt2"],
    "optimize --dry-run --no-verify": lambda archive, folder: [
        "optimize",
        archive,
        "--dry-run",
        "--no-verify",
    ],
    "verify": lambda archive, folder: ["verify", save_clean(folder / "other.pt2"), archive],
    "show": lambda archive, folder: ["show", archive, "-o", folder / "picture.svg"],
}


@pytest.mark.parametrize("kind", sorted(PLANTED))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_planted_pickle_never_runs(kind, command, tmp_path):
    marker = tmp_path / "marker"
    archive = PLANTED[kind](tmp_path, marker)
    result = graphopt(*COMMANDS[command](archive, tmp_path))
    assert_bad_input(result, str(archive), "unpickle", "--trust-pickle")
    assert not marker.exists()
    assert not (tmp_path / "out.pt2").exists() and not (tmp_path / "picture.svg").exists()


def test_refused_in_a_fresh_process_too(tmp_path):
    marker = tmp_path / "marker"
    archive = PLANTED["weight"](tmp_path, marker)
    result = graphopt_process("optimize", archive, "--dry-run", "--no-verify")
    assert_bad_input(result, "'weight' is pickled", "--trust-pickle")
    assert not marker.exists()


def test_python_api_refuses_unless_trusted(tmp_path):
    marker = tmp_path / "marker"
    archive = PLANTED["constant"](tmp_path, marker)
    with pytest.raises(BadInput, match="trust_pickle=True"):
        api.optimize(archive, verify=False)
    assert not marker.exists()
    api.optimize(archive, verify=False, trust_pickle=True)
    assert marker.exists()  # trusted: torch unpickled it


def test_trust_pickle_flag_lets_torch_unpickle(tmp_path):
    marker = tmp_path / "marker"
    archive = PLANTED["sample_inputs"](tmp_path, marker)
    result = graphopt("optimize", archive, "--dry-run", "--no-verify", "--trust-pickle")
    assert "--trust-pickle" not in result.stderr
    assert marker.exists()


def test_ordinary_archives_load_without_the_flag(tmp_path):
    archive = save_clean(tmp_path / "clean.pt2")  # (its sample inputs are a weights-only pickle)
    result = graphopt("optimize", archive, "-o", tmp_path / "clean.opt.pt2")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "clean.opt.pt2").is_file()


def test_entries_that_differ_only_in_case_are_refused(tmp_path):
    """torch's zip reader finds names without case: the check must see what torch would read."""
    import zipfile

    archive = save_clean(tmp_path / "twice.pt2")
    with zipfile.ZipFile(archive) as source:
        config = next(n for n in source.namelist() if n.endswith("_weights_config.json"))
    with zipfile.ZipFile(archive, "a") as target:
        target.writestr(config.upper(), b"{}")
    assert_bad_input(graphopt("optimize", archive, "--dry-run", "--no-verify"), "two entries named")
