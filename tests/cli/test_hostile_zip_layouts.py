"""A .pt2 that shows graphopt's checks one program and torch's reader another. Python's zipfile and torch's
zip reader find a zip's directory differently: an archive with two central directories (zipfile takes the
one just before the end record, torch the one the end record points at) passed every check with an
honest program while torch loaded one whose size expressions run code; so did a program stored under
models/ with another suffix than .json, which torch loads and the checks skipped. torch is now given only
a copy made of the entries the checks read, and every models/ entry is checked."""

import json
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from cli_run import assert_bad_input, graphopt
from test_hostile_archives import _dynamic_archive, _planted_expression, program_entry

import graphopt as api
from graphopt.errors import BadInput


def _entries(path: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def _stored_zip(entries, base: int) -> tuple[bytes, bytes]:
    """(local headers with data, central directory) of stored ``entries``, offsets counted from ``base``."""
    region, directory = b"", b""
    for name, data in entries:
        encoded, crc = name.encode(), zlib.crc32(data)
        directory += struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0x21, crc, len(data), len(data), len(encoded),
            0, 0, 0, 0, 0, base + len(region),
        ) + encoded  # fmt: skip
        region += struct.pack(
            "<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc, len(data), len(data), len(encoded), 0
        ) + encoded + data  # fmt: skip
    return region, directory


def _end_record(count: int, size: int, offset: int) -> bytes:
    return struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, size, offset, 0)


def _two_directories(honest: Path, planted: Path, target: Path) -> Path:
    """An archive whose end record points at ``planted``'s entries (what torch reads) while the central
    directory just before the end record lists ``honest``'s (what zipfile reads: it takes the gap to
    be data prepended to the zip and shifts every offset by it)."""
    good, evil = _entries(honest), _entries(planted)
    evil_region, evil_directory = _stored_zip(evil, 0)
    good_region, _ = _stored_zip(good, 0)
    evil_region += b"\0" * (len(good_region) + 64)  # (room for zipfile's shifted offsets to stay >= 0)
    size = len(evil_directory)
    good_start = len(evil_region) + size
    shift = size + len(good_region)  # what zipfile will take for prepended data
    good_region, good_directory = _stored_zip(good, good_start - shift)
    assert len(good_directory) == size, "both directories must have one size"
    data = evil_region + evil_directory + good_region + good_directory
    target.write_bytes(data + _end_record(len(evil), size, len(evil_region)))
    return target


def test_torch_reads_the_entries_the_checks_read_not_another_directory(tmp_path):
    marker = tmp_path / "marker"
    planted = _planted_expression(tmp_path, marker)
    archive = _two_directories(tmp_path / "clean.pt2", planted, tmp_path / "two_directories.pt2")
    with zipfile.ZipFile(archive) as seen:  # (zipfile sees the honest program)
        assert all(b"__import__" not in seen.read(n) for n in seen.namelist())

    _, report = api.optimize(archive)

    assert not marker.exists()
    assert report.verification["ok"]


def _with_program_entry(source: Path, target: Path, name: str, data: bytes) -> Path:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            new.writestr(info.filename, old.read(info))
        root = old.namelist()[0].split("/", 1)[0]
        new.writestr(f"{root}/{name}", data)
    return target


@pytest.mark.parametrize("name", ["models/evil0.txt", "Models/evil.bin"])
def test_a_program_under_models_with_another_suffix_is_checked_too(tmp_path, name):
    marker = tmp_path / "marker"
    planted = _planted_expression(tmp_path, marker)
    _, program = program_entry(planted)
    archive = _with_program_entry(tmp_path / "clean.pt2", tmp_path / "suffix.pt2", name, program)

    result = graphopt("optimize", archive, "-o", tmp_path / "out" / "suffix.pt2")

    assert_bad_input(result, str(archive), name.rsplit("/", 1)[-1], "size expression")
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_two_entries_of_one_name_are_refused_even_where_pickles_are_trusted(tmp_path):
    clean = _dynamic_archive(tmp_path / "clean.pt2")
    name, program = program_entry(clean)
    twice = _with_program_entry(clean, tmp_path / "twice.pt2", name.split("/", 1)[1].upper(), program)

    with pytest.raises(BadInput, match="two entries named"):
        api.optimize(twice, trust_pickle=True)
    assert json.loads(program)  # (an honest program both times: the layout alone is refused)
