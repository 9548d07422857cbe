"""walship: HBase cluster replication as an Airflow-managed, Spark-shipped pipeline.

The library never imports Airflow; DAGs, plugins and Spark jobs are thin layers over it.
"""

from __future__ import annotations

from walship.errors import (
    ConfigError,
    CorruptWalError,
    InvalidWalNameError,
    UnsupportedWalError,
    WalError,
    WalshipError,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "CorruptWalError",
    "InvalidWalNameError",
    "UnsupportedWalError",
    "WalError",
    "WalshipError",
    "__version__",
]
