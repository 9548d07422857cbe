"""Notifiers: :mod:`.webhook` (a JSON POST to a URL) and the DAGs' configured failure callback
(:mod:`.callbacks`)."""
