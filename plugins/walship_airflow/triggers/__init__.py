"""Triggers: :mod:`.queues` (the triggerer's side of the queue sensors)."""
