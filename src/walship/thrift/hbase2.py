"""HBase's second Thrift service (``THBaseService``), loaded with thriftpy2 from
``hbase2.thrift`` beside this module (HBase's field ids and types).

The one place walship takes the Thrift2 classes from: the sink, the scope admin and the
minicluster's server share them (and so the same exception types, ``TIOError`` and
``TIllegalArgument``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import thriftpy2

__all__ = ["hbase2", "table_name", "table_name_text"]

#: The loaded IDL: ``hbase2.THBaseService`` (the service), ``TPut``, ``TDelete``,
#: ``TDeleteType``, ``TColumnFamilyDescriptor``, ``TIOError``, ...
hbase2: Any = thriftpy2.load(str(Path(__file__).with_name("hbase2.thrift")), module_name="hbase2_thrift")


def table_name(name: str | bytes) -> Any:
    """``ns:qualifier`` (or ``qualifier`` in the default namespace) as a ``TTableName``."""
    raw = name.encode() if isinstance(name, str) else name
    ns, sep, qualifier = raw.rpartition(b":")
    return hbase2.TTableName(ns=ns if sep else None, qualifier=qualifier)


def table_name_text(tname: Any) -> str:
    """A ``TTableName`` as HBase prints it: ``qualifier`` in the default namespace, else ``ns:qualifier``."""
    ns = tname.ns or b""
    qualifier = tname.qualifier or b""
    text = qualifier.decode(errors="replace")
    return text if ns in (b"", b"default") else f"{ns.decode(errors='replace')}:{text}"
