"""What installing graphopt pulls in: no ONNX Runtime, Triton or pydot unless an extra asks for it.

The first test reads the installed distribution's metadata (what pip resolves on); the second lets pip
resolve a real install, offline, in a throwaway environment holding a stand-in onnxruntime-gpu.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

OPTIONAL = {"onnxruntime", "onnxruntime-gpu", "triton", "pydot"}


def requirements(extra: str = "") -> set[str]:
    """The names graphopt requires when installed with ``extra`` (none: the base install)."""
    names = set()
    for line in metadata.requires("graphopt") or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
            names.add(canonicalize_name(requirement.name))
    return names


def test_base_install_requires_no_runtime_triton_or_pydot():
    assert not requirements() & OPTIONAL
    assert {"torch", "onnx", "numpy"} <= requirements()


@pytest.mark.parametrize(
    ("extra", "brings", "leaves_out"),
    [
        ("cpu", "onnxruntime", {"onnxruntime-gpu", "triton", "pydot"}),
        ("gpu", "onnxruntime-gpu", {"onnxruntime", "triton", "pydot"}),
        ("show", "pydot", {"onnxruntime", "onnxruntime-gpu", "triton"}),
        ("test", "triton", {"onnxruntime", "onnxruntime-gpu"}),
    ],
)
def test_each_extra_brings_what_it_is_for(extra, brings, leaves_out):
    assert brings in requirements(extra)
    assert not requirements(extra) & leaves_out


def _wheel(folder: Path, name: str, version: str, metadata_text: str | None = None) -> None:
    """A wheel holding nothing but its metadata."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    files = {
        f"{info}/METADATA": metadata_text or f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


def _version_for(requirements: list[Requirement]) -> str:
    """A version every one of ``requirements`` (on one package) accepts: the installed one, or a high one."""
    try:
        candidates = [metadata.version(requirements[0].name), "999"]
    except metadata.PackageNotFoundError:
        candidates = ["999"]
    return next(v for v in candidates if all(r.specifier.contains(v, prereleases=True) for r in requirements))


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> Path:
    """graphopt's real metadata, and a stand-in for each package it may require, in a folder for pip."""
    folder = tmp_path_factory.mktemp("wheels")
    distribution = metadata.distribution("graphopt")
    _wheel(folder, "graphopt", distribution.version, distribution.read_text("METADATA"))
    by_name: dict[str, list[Requirement]] = {}
    for line in distribution.requires or []:
        requirement = Requirement(line)
        by_name.setdefault(canonicalize_name(requirement.name), []).append(requirement)
    assert "onnxruntime-gpu" in by_name
    for name, requirements in by_name.items():
        _wheel(folder, name, _version_for(requirements))
    return folder


def _pip(python: Path, wheels: Path, *args: str) -> subprocess.CompletedProcess:
    # --isolated: no pip configuration (index, constraints) of this machine; --no-index: offline.
    command = [sys.executable, "-m", "pip", "--python", str(python), "--isolated", *args]
    command += ["--disable-pip-version-check", "--no-index", "--find-links", str(wheels)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _would_install(python: Path, wheels: Path, target: str, report: Path) -> set[str]:
    _pip(python, wheels, "install", "--dry-run", "--quiet", "--report", str(report), target)
    return {canonicalize_name(item["metadata"]["name"]) for item in json.loads(report.read_text())["install"]}


@pytest.mark.slow
def test_pip_keeps_an_installed_onnxruntime_gpu(stand_ins, tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True)
    python = tmp_path / "env" / "bin" / "python"

    assert "onnxruntime" in _would_install(python, stand_ins, "graphopt[cpu]", tmp_path / "cpu.json")

    _pip(python, stand_ins, "install", "--quiet", "onnxruntime-gpu")
    for target in ("graphopt", "graphopt[gpu]"):
        planned = _would_install(python, stand_ins, target, tmp_path / "plan.json")
        assert "graphopt" in planned
        assert not planned & {"onnxruntime", "onnxruntime-gpu", "triton", "pydot"}, (target, planned)


def test_installed_wheel_is_tagged_for_any_python_3():
    tags = [
        line.split(":", 1)[1].strip()
        for line in metadata.distribution("graphopt").read_text("WHEEL").splitlines()
        if line.startswith("Tag:")
    ]
    assert tags and all(tag.startswith("py3-none-") for tag in tags), tags
