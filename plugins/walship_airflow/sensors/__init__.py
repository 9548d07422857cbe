"""Sensors: :mod:`.queues` (a peer's queues have work; a peer is drained)."""
