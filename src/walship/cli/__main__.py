"""``python -m walship.cli``: the ``walship`` command."""

from __future__ import annotations

import sys

from walship.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
