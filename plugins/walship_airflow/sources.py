"""The source clusters one Airflow serves: a ``walship`` connection each, named in Airflow's
configuration, and the DAG ids, assets and pools that belong to each.

``[walship] sources`` (environment ``AIRFLOW__WALSHIP__SOURCES``) lists the connections,
comma-separated, each ``CONN_ID`` or ``CONN_ID=SUFFIX``::

    [walship]
    sources = walship_source, hbase_east, hbase-west-prod=west

The default connection ``walship_source`` keeps the plain DAG ids (``walship_replicate``);
every other source's DAG ids end in its suffix, by default its connection id
(``walship_replicate_hbase_east``, ``walship_replicate_west``). Without the option, the one
source is ``walship_source``.

A connection id listed twice, two sources with the same suffix, or a suffix that cannot end a
DAG id is a :class:`SourcesError` naming them, raised when the DAG files are parsed (an
import error of each DAG file in the UI, never a source silently left out).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from walship.errors import ConfigError

log = logging.getLogger(__name__)

#: the connection of the source cluster whose DAGs keep their plain ids
DEFAULT_CONN_ID = "walship_source"
#: Airflow's configuration section of the provider
SECTION = "walship"

#: the DAGs every source gets, by their plain ids (each built by ``walship_airflow.dags.<name>``,
#: the id without ``walship_``)
PER_SOURCE_DAGS = (
    "walship_add_peer",
    "walship_clean",
    "walship_copy",
    "walship_drain",
    "walship_replay",
    "walship_replicate",
    "walship_scope",
    "walship_sep",
    "walship_status",
    "walship_tail",
    "walship_verify",
)

_SUFFIX = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


class SourcesError(ConfigError):
    """``[walship] sources`` names a connection twice, gives two sources one suffix, or a
    suffix a DAG id cannot end in."""


class UnknownSourceError(SourcesError):
    """A connection that is not among ``[walship] sources``."""


@dataclass(frozen=True)
class Source:
    """A source cluster served by this Airflow: its connection and the suffix of its DAG ids
    (empty for the default connection)."""

    conn_id: str = DEFAULT_CONN_ID
    suffix: str = ""

    def dag_id(self, base: str) -> str:
        """``base`` for the default source, ``base_SUFFIX`` for the others."""
        return f"{base}_{self.suffix}" if self.suffix else base

    def dag_ids(self) -> list[str]:
        """The ids of this source's DAGs (:data:`PER_SOURCE_DAGS`, suffixed)."""
        return [self.dag_id(base) for base in PER_SOURCE_DAGS]

    def asset_uri(self, uri: str) -> str:
        """An asset URI of this source: ``walship://status`` stays as it is for the default
        source and becomes ``walship://status/SUFFIX`` for another (``walship://peer/1``:
        ``walship://peer/1/SUFFIX``)."""
        return f"{uri}/{self.suffix}" if self.suffix else uri

    def asset_name(self, name: str) -> str:
        return f"{name}-{self.suffix}" if self.suffix else name

    @property
    def tags(self) -> list[str]:
        """The DAG tags naming the source (none for the default one)."""
        return [f"source:{self.conn_id}"] if self.suffix else []

    def doc(self, text: str) -> str:
        """A DAG's docs with the default connection's name replaced by this source's."""
        return text.replace("`walship_source`", f"`{self.conn_id}`") if self.conn_id != DEFAULT_CONN_ID else text


def parse_sources(text: str) -> list[Source]:
    """The sources of ``[walship] sources`` (see the module's docstring).

    :raises SourcesError: a connection id given twice, two sources with one suffix, an empty
        or malformed entry (each named).
    """
    sources: list[Source] = []
    by_suffix: dict[str, str] = {}
    seen: set[str] = set()
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        conn_id, has_suffix, suffix = (part.strip() for part in entry.partition("="))
        if not conn_id:
            raise SourcesError(f"[walship] sources: entry {entry!r} has no connection id")
        if conn_id in seen:
            raise SourcesError(f"[walship] sources: connection {conn_id!r} is listed twice")
        seen.add(conn_id)
        if not has_suffix:
            suffix = "" if conn_id == DEFAULT_CONN_ID else conn_id
        elif not suffix:
            raise SourcesError(f"[walship] sources: connection {conn_id!r} has an empty suffix after '='")
        if suffix and not _SUFFIX.fullmatch(suffix):
            raise SourcesError(
                f"[walship] sources: connection {conn_id!r}: suffix {suffix!r} cannot end a DAG id "
                "(letters, digits, '_', '.', '-'; give one with CONN_ID=SUFFIX)"
            )
        if suffix in by_suffix:
            first = by_suffix[suffix]
            which = f"suffix {suffix!r}" if suffix else "the plain DAG ids"
            raise SourcesError(f"[walship] sources: connections {first!r} and {conn_id!r} both get {which}")
        by_suffix[suffix] = conn_id
        sources.append(Source(conn_id, suffix))
    if not sources:
        raise SourcesError("[walship] sources is empty: name at least one walship connection")
    return sources


def configured_sources() -> list[Source]:
    """The sources of Airflow's configuration (``[walship] sources``; ``walship_source`` alone
    without it)."""
    from airflow.sdk import conf

    return parse_sources(conf.get(SECTION, "sources", fallback=DEFAULT_CONN_ID))


def source_by_conn_id(conn_id: str | None, sources: Sequence[Source] | None = None) -> Source:
    """The source of a connection id among ``sources`` (the configured ones by default; the
    first for ``None``).

    :raises UnknownSourceError: a connection that is not among ``[walship] sources``.
    :raises SourcesError: ``[walship] sources`` is malformed.
    """
    sources = configured_sources() if sources is None else sources
    if conn_id is None:
        return sources[0]
    for source in sources:
        if source.conn_id == conn_id:
            return source
    names = ", ".join(s.conn_id for s in sources)
    raise UnknownSourceError(f"source {conn_id!r} is not a walship source of this Airflow ([walship] sources: {names})")
