"""A sink registered by name at run time, as a third-party sink is by entry point: a peer that
names it gets it, with the peer and the context it was created for; bad names are refused."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from walship import entrypoints
from walship.errors import ConfigError
from walship.peer import PeerConfig
from walship.sinks.base import ApplyStats, FilteredEntry, SinkContext
from walship.sinks.registry import create_sink, register_sink, sink_protocols


class NamedSink:
    def __init__(self, peer: PeerConfig, context: SinkContext) -> None:
        self.peer, self.context = peer, context

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        return ApplyStats(cells=sum(len(fe.cells) for fe in entries))

    def close(self) -> None:
        pass


def test_a_registered_sink_is_what_a_peer_naming_it_gets() -> None:
    register_sink("named-at-run-time", NamedSink)
    assert "named-at-run-time" in sink_protocols()
    peer = PeerConfig("7", "zk:2181:/b", configuration={"walship.sink.protocol": "named-at-run-time"})
    context = SinkContext("/wal-root", replaying=True)
    sink = create_sink(peer, context)
    assert isinstance(sink, NamedSink) and sink.peer is peer and sink.context is context


@pytest.mark.parametrize("name", ["", "a b", "a/b", "a:b"])
def test_bad_sink_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="invalid sink protocol name"):
        register_sink(name, NamedSink)


def test_a_sink_installed_after_the_entry_points_were_read_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry points are read once a process; a package installed later (its module and its
    dist-info on the path) still gives a peer naming its sink that sink."""
    assert "installed-late" not in sink_protocols()  # read now, without it
    (tmp_path / "late_sink.py").write_text(
        "class LateSink:\n    def __init__(self, peer, context):\n        self.peer = peer\n"
    )
    info = tmp_path / "late_sink-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: late-sink\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[walship.sinks]\ninstalled-late = late_sink:LateSink\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        peer = PeerConfig("8", "zk:2181:/b", configuration={"walship.sink.protocol": "installed-late"})
        sink = create_sink(peer, SinkContext("/wal-root"))
        assert type(sink).__name__ == "LateSink" and sink.peer is peer  # type: ignore[attr-defined]
        assert "installed-late" in sink_protocols()
    finally:
        # the package gone again, the entry points read anew: no later test meets it
        monkeypatch.undo()
        entrypoints._read.cache_clear()
    assert "installed-late" not in sink_protocols()
