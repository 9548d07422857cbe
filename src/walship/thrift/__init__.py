"""HBase's Thrift interfaces, loaded from their IDL files with thriftpy2, and the modes its
Thrift servers run in (importing this package loads no IDL)."""

from __future__ import annotations

__all__ = ["PROTOCOLS", "TRANSPORTS"]

#: Thrift transports of HBase's Thrift server: buffered (default), framed (its ``-f``).
TRANSPORTS = ("buffered", "framed")
#: Thrift protocols: binary (default), compact (its ``-c``).
PROTOCOLS = ("binary", "compact")
