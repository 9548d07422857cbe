"""HBase's first Thrift service (``Hbase``), from the ``Hbase.thrift`` IDL happybase ships.

happybase loads that IDL with thriftpy2 as the module ``Hbase_thrift`` when it is imported;
this module is the one place walship takes it from, so that the sink, the minicluster and
happybase's own client share the same classes (and the same exception types).
"""

from __future__ import annotations

import importlib
from typing import Any

import happybase  # noqa: F401 - loads Hbase.thrift as the module Hbase_thrift

__all__ = ["Hbase_thrift"]

#: The loaded IDL: ``Hbase_thrift.Hbase`` (the service), ``Mutation``, ``BatchMutation``,
#: ``IOError``, ``IllegalArgument``, ``AlreadyExists``, ...
Hbase_thrift: Any = importlib.import_module("Hbase_thrift")
