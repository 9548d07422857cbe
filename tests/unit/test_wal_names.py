"""WAL file names as HBase builds them."""

from __future__ import annotations

import pytest

from walship.errors import InvalidWalNameError
from walship.servername import ServerName
from walship.wal import build_wal_name, is_wal_name, parse_wal_name

RS = ServerName("rs-1.example.com", 16020, 1600000000000)


@pytest.mark.parametrize(
    ("name", "group", "ts", "meta", "server"),
    [
        (
            "host%2C16020%2C1600000000000.1600000000123",
            "host%2C16020%2C1600000000000",
            1600000000123,
            False,
            "host,16020,1600000000000",
        ),
        (
            "host%2C16020%2C1469772903345.default.1470426151350",
            "host%2C16020%2C1469772903345.default",
            1470426151350,
            False,
            "host,16020,1469772903345",
        ),
        (
            "host%2C16020%2C1600000000000.meta.1600000000123.meta",
            "host%2C16020%2C1600000000000.meta",
            1600000000123,
            True,
            "host,16020,1600000000000",
        ),
        (
            "host%2C16020%2C1606673870978.host%2C16020%2C1606673870978.regiongroup-0.1606675447034",
            "host%2C16020%2C1606673870978.host%2C16020%2C1606673870978.regiongroup-0",
            1606675447034,
            False,
            "host,16020,1606673870978",
        ),
        (
            "rs-1.example.com%2C16020%2C1600000000000.1600000000999",
            "rs-1.example.com%2C16020%2C1600000000000",
            1600000000999,
            False,
            "rs-1.example.com,16020,1600000000000",
        ),
        ("custom-prefix.42", "custom-prefix", 42, False, None),
    ],
)
def test_parse(name: str, group: str, ts: int, meta: bool, server: str | None) -> None:
    w = parse_wal_name(name)
    assert (w.group, w.timestamp, w.is_meta) == (group, ts, meta)
    assert (str(w.server) if w.server else None) == server
    assert str(w) == name


def test_build_round_trips() -> None:
    name = build_wal_name(RS, 1600000000555)
    assert name == "rs-1.example.com%2C16020%2C1600000000000.1600000000555"
    w = parse_wal_name(name)
    assert w.server == RS and w.timestamp == 1600000000555 and not w.is_meta
    meta = build_wal_name(RS, 7, meta=True)
    assert meta == "rs-1.example.com%2C16020%2C1600000000000.meta.7.meta"
    assert parse_wal_name(meta).is_meta
    group = build_wal_name(RS, 9, provider_id="regiongroup-1")
    assert parse_wal_name(group).group.endswith(".regiongroup-1")
    assert parse_wal_name(group).server == RS


def test_order_by_timestamp() -> None:
    names = [build_wal_name(RS, ts) for ts in (30, 4, 200)]
    assert [w.timestamp for w in sorted(parse_wal_name(n) for n in names)] == [4, 30, 200]


@pytest.mark.parametrize(
    "name",
    ["", "0000000000000016310", "../etc/passwd.123", "a/b.123", "..", "wal\x00.12", "no-timestamp", "x.12a"],
)
def test_refused(name: str) -> None:
    with pytest.raises(InvalidWalNameError):
        parse_wal_name(name)
    assert not is_wal_name(name)


def test_server_name() -> None:
    assert str(ServerName.parse("a-b.c,1,2")) == "a-b.c,1,2"
    with pytest.raises(ValueError, match="not a server name"):
        ServerName.parse("a,b,c")
