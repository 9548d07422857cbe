"""Operators: :mod:`.ship` (the Spark ship job, given the source's credentials at run time)."""
