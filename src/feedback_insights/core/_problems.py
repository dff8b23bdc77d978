"""What a validator says about a record: a dotted field path and a message."""

from __future__ import annotations

from typing import NamedTuple


class Problem(NamedTuple):
    """One thing wrong with a record. ``path`` is dotted (``evidence.status_code``,
    ``params.items.0.severity``); the record itself is ``""``."""

    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def join_path(path: str, key: object) -> str:
    """``path`` one level deeper: ``join_path("evidence", "status")`` is ``evidence.status``."""
    return f"{path}.{key}" if path else str(key)
