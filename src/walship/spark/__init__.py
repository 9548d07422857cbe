"""Spark is the point here: shipping a peer's queues as Spark tasks, one task per queue."""
