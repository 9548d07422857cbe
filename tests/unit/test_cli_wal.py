"""`walship wal dump`: output keys, byte rendering, exit codes, through the real command."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hbase_bytes import RawEntry, header, wal_bytes

from walship.cli import main
from walship.wal.dump import to_string_binary

KEYS = ["offset", "end_offset", "table", "region", "sequence_id", "write_time", "cluster_ids", "scopes", "cells"]
CELL_KEYS = ["row", "family", "qualifier", "timestamp", "type", "value", "tags"]


def test_to_string_binary_rules() -> None:
    assert to_string_binary(b"abc XYZ~") == "abc XYZ~"
    assert to_string_binary(b"\\") == "\\x5C"
    assert to_string_binary(b"\x00\x1f\x7f\x80\xff") == "\\x00\\x1F\\x7F\\x80\\xFF"
    assert to_string_binary(b"") == ""


def _wal(tmp_path: Path, *, trailer: bool = True, extra: bytes = b"") -> tuple[Path, list[RawEntry]]:
    cid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    raws = [
        RawEntry(
            b"abcdef",
            b"ns:t",
            5,
            1000,
            [(b"r\x00\\", b"f", b"q", 9, 4, b"v\xff", [(7, b"t\x01")])],
            cluster_ids=[cid],
            scopes={b"f": 1},
        ),
        RawEntry(
            b"abcdef", b"ns:t", 6, 1001, [(b"r2", b"f", b"", 10, 10, b"", []), (b"r2", b"g", b"", 10, 14, b"", [])]
        ),
        RawEntry(
            b"abcdef", b"t2", 7, 1002, [(b"r3", b"f", b"q", 11, 8, b"", []), (b"r3", b"f", b"q", 11, 12, b"", [])]
        ),
    ]
    path = tmp_path / "host%2C16020%2C1.1000"
    path.write_bytes(wal_bytes(raws, trailer=trailer) + extra)
    return path, raws


def test_dump_json_exact_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _wal(tmp_path)
    assert main(["wal", "dump", "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 3
    for row in rows:
        assert list(row) == KEYS
        for cell in row["cells"]:
            assert list(cell) == CELL_KEYS
    first = rows[0]
    assert first["offset"] == len(header())
    assert first["table"] == "ns:t" and first["region"] == "abcdef" and first["sequence_id"] == 5
    assert first["write_time"] == 1000
    assert first["cluster_ids"] == ["12345678-1234-5678-1234-567812345678"]
    assert first["scopes"] == {"f": 1}
    assert first["cells"][0] == {
        "row": "r\\x00\\x5C",
        "family": "f",
        "qualifier": "q",
        "timestamp": 9,
        "type": "Put",
        "value": "v\\xFF",
        "tags": [{"type": 7, "value": "t\\x01"}],
    }
    assert [c["type"] for r in rows[1:] for c in r["cells"]] == [
        "DeleteFamilyVersion",
        "DeleteFamily",
        "Delete",
        "DeleteColumn",
    ]
    assert rows[1]["offset"] == rows[0]["end_offset"]
    assert "3 entries" in err and "read to the end" in err


def test_dump_start_offset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _wal(tmp_path)
    main(["wal", "dump", "--json", str(path)])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["wal", "dump", "--json", "--start-offset", str(rows[0]["end_offset"]), str(path)]) == 0
    rest = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rest == rows[1:]


def test_dump_incomplete_tail_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, raws = _wal(tmp_path, trailer=False)
    data = path.read_bytes()
    path.write_bytes(data[:-3])
    assert main(["wal", "dump", "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2
    assert f"incomplete entry at byte offset {len(data) - len(raws[-1].encode())}" in err


def test_dump_corruption_exits_one_with_file_and_offset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, raws = _wal(tmp_path)
    data = bytearray(path.read_bytes())
    second = len(header()) + len(raws[0].encode())
    data[second + 2 : second + 4] = b"\xff\xff"
    path.write_bytes(bytes(data))
    assert main(["wal", "dump", "--json", str(path)]) == 1
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1  # the entry before the corruption was printed
    assert f"{path} at byte offset {second}" in err


def test_dump_refused_header_exits_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.1"
    path.write_bytes(header(has_compression=True, has_value_compression=True, value_compression_algorithm=5))
    assert main(["wal", "dump", str(path)]) == 1
    err = capsys.readouterr().err
    assert str(path) in err and "value compression 'bzip2' (hbase.regionserver.wal.value.compression.type)" in err


def test_dump_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["wal", "dump", str(tmp_path / "nope")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_dump_text_and_console_script(tmp_path: Path) -> None:
    path, _ = _wal(tmp_path)
    exe = Path(sys.executable).with_name("walship")
    proc = subprocess.run([str(exe), "wal", "dump", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "row=r\\x00\\x5C, column=f:q, timestamp=9, type=Put" in proc.stdout
    assert "table=ns:t" in proc.stdout
    url = subprocess.run(
        [str(exe), "wal", "dump", "--json", "file://" + str(path)], capture_output=True, text=True, check=False
    )
    assert url.returncode == 0, url.stderr
    assert len(url.stdout.splitlines()) == 3


def test_bad_flag_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["wal", "dump", "--start-offset", "-4", "x"])
    assert exc.value.code == 1
    assert "--start-offset" in capsys.readouterr().err


def test_sample_writes_a_readable_wal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "s.1"
    assert main(["wal", "sample", str(target), "--entries", "7"]) == 0
    capsys.readouterr()
    assert main(["wal", "dump", "--json", str(target)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 7
    assert {c["type"] for r in rows for c in r["cells"]} == {"Put", "Delete", "DeleteColumn", "DeleteFamily"}
