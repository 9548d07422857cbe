"""Serial replication (HBase 2.1+): what a shipper needs to push a region's edits in order
across region moves, splits and merges. :class:`BarrierReader` reads the replication barriers
HBase keeps in the source's ``hbase:meta``."""

from __future__ import annotations

from walship.serial.barriers import BarrierReader
from walship.serial.metarow import RegionBarriers, encoded_region_name, split_parent_names

__all__ = ["BarrierReader", "RegionBarriers", "encoded_region_name", "split_parent_names"]
