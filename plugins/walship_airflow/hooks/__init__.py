"""Hooks: :mod:`.source` (the ``walship`` connection: a source cluster) and :mod:`.spark`
(Spark submission of walship's jobs)."""
