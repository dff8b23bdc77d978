"""One report as a source delivered it, parsed lazily (in whichever process does the work)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

from ..core import MAX_DEPTH, jsontext


class Unparsed(Enum):
    """Stand-ins for ``RawItem.obj`` (an enum, so they survive pickling to a worker)."""

    PENDING = "pending"  # the bytes in ``data`` have not been parsed yet
    FAILED = "failed"  # the text is not JSON; ``parse_error`` says why


PENDING = Unparsed.PENDING
UNPARSED = Unparsed.FAILED


@dataclass(slots=True)
class RawItem:
    """One report as a source delivered it. ``text`` is the exact text when there was one
    (a JSONL line); ``obj`` is the parsed value, :data:`UNPARSED` with ``parse_error`` set,
    or :data:`PENDING` while the line's bytes wait in ``data`` to be parsed by :meth:`parse`
    (in whichever process does the work).
    """

    obj: Any
    position: str
    text: str | None = None
    parse_error: str | None = None
    #: Bytes as received, when known: the body-size limit is checked against it.
    size: int | None = None
    #: How many identical items came before this one in the same delivery (file): the n-th
    #: copy of an id-less report is a retry, not a re-delivery, and gets its own id.
    occurrence: int = 0
    data: bytes | None = None
    #: Known to nest no deeper than the limit (its text has no more brackets than that), so
    #: the depth check can skip the walk: set when a line is parsed.
    shallow: bool = False

    @classmethod
    def line(cls, data: bytes, position: str, occurrence: int = 0) -> RawItem:
        return cls(PENDING, position, size=len(data), occurrence=occurrence, data=data)

    def parse(self) -> RawItem:
        if self.obj is PENDING and self.data is not None:
            self.text = self.data.decode("utf-8", errors="replace")
            self.shallow = self.data.count(b"{") + self.data.count(b"[") <= MAX_DEPTH
            try:
                self.obj = orjson.loads(self.data)
            except orjson.JSONDecodeError as exc:
                self.obj, self.parse_error = UNPARSED, f"not valid JSON: {exc}"
            self.data = None
        return self

    def raw_text(self) -> str:
        if self.text is not None:
            return self.text
        return jsontext.dumps(self.obj).decode()
