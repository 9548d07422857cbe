"""A job's description as JSON, passed between tasks (an Airflow task to spark-submit, a
driver to its executors): the fields of a frozen dataclass, nothing more, read back with a
:class:`~walship.errors.ConfigError` that names the job and what is wrong."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any, ClassVar, Self

from walship.errors import ConfigError

__all__ = ["JobDescription"]


class JobDescription:
    """The JSON of a frozen dataclass: mix in, and name the job (:attr:`KIND`), the fields that
    are tuples (JSON has lists) and the defaults of fields older descriptions lack."""

    #: what error messages call it: "ship job", "verify job"
    KIND: ClassVar[str]
    #: fields held as tuples
    TUPLES: ClassVar[tuple[str, ...]] = ()
    #: fields a description may leave out, and their values then
    MISSING: ClassVar[dict[str, Any]] = {}

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)  # type: ignore[call-overload]

    @classmethod
    def from_json(cls, text: str) -> Self:
        """:raises ConfigError: not JSON, an unknown or missing field, a bad value."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{cls.KIND} description is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{cls.KIND} description must be a JSON object")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})  # type: ignore[arg-type]
        if unknown:
            raise ConfigError(f"{cls.KIND} description: unknown field(s) {', '.join(unknown)}")
        for name in cls.TUPLES:
            data[name] = tuple(data.get(name) or ())
        for name, value in cls.MISSING.items():
            data.setdefault(name, value)
        try:
            return cls(**data)
        except TypeError as exc:
            raise ConfigError(f"{cls.KIND} description: {exc}") from None
