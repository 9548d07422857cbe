"""Twins: an object of real HBase's (a Thrift2 client, a happybase table or batch, a raw Thrift1
client) and the same object of the minicluster's, called alike. Each call is made on both; its
answer is HBase's once the minicluster's equals it, and where HBase raises, the minicluster must
raise the same type. Real HBase is the reference, not an expectation written in a test."""

from __future__ import annotations

import inspect
from typing import Any

#: Wall-clock milliseconds from here on (2001 and later): a timestamp the server chose.
_NOW_FLOOR = 10**12


def now_free(value: Any) -> Any:
    """``value`` (an answer: Thrift structs, lists, dicts, tuples) with every timestamp a server
    chose itself, the wall clock in milliseconds, read as ``"now"``: two clusters' clocks
    differ, the rest of an answer must not. Every timestamp a test writes is far smaller."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return "now" if value >= _NOW_FLOOR else value
    if isinstance(value, list | tuple):
        return type(value)(now_free(v) for v in value)
    if isinstance(value, dict):
        return {k: now_free(v) for k, v in value.items()}
    if hasattr(value, "thrift_spec"):
        return (type(value).__name__, {k: now_free(v) for k, v in vars(value).items()})
    return value


class Twin:
    """Real HBase's object and the minicluster's, called alike (see the module). Generators
    (happybase's scans) are read whole. ``answered``: the errors a server answers with. Raised
    is HBase's error, or with ``minicluster_errors`` the minicluster's, whose messages name the
    thing (HBase's carry a Java exception's text)."""

    def __init__(
        self, real: Any, mini: Any, answered: tuple[type[BaseException], ...], minicluster_errors: bool = False
    ) -> None:
        self.real = real
        self.mini = mini
        self._answered = answered
        self._mini_errors = minicluster_errors

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            answers = []
            for side in (self.real, self.mini):
                try:
                    out = getattr(side, name)(*args, **kwargs)
                    answers.append((list(out) if inspect.isgenerator(out) else out, None))
                except self._answered as exc:
                    answers.append((None, exc))
            (real, real_exc), (mini, mini_exc) = answers
            where = f"{name}{args}{kwargs or ''}"
            assert type(mini_exc) is type(real_exc), f"{where}: HBase {real_exc!r}, minicluster {mini_exc!r}"
            if real_exc is not None:
                raise mini_exc if self._mini_errors else real_exc
            assert now_free(mini) == now_free(real), f"{where}:\n  HBase       {real}\n  minicluster {mini}"
            return real

        return call

    def batch(self, **kwargs: Any) -> Twin:
        return Twin(self.real.batch(**kwargs), self.mini.batch(**kwargs), self._answered, self._mini_errors)

    def __enter__(self) -> Twin:
        self.real.__enter__()
        self.mini.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.real.__exit__(*exc)
        self.mini.__exit__(*exc)
