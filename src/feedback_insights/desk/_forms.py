"""Reading query, path and form values, each refusal naming its field (a 400 page, never a 500).

Ids are parsed strictly: the digits 0-9 and nothing else. Python's own tests are looser than
they look (``"²".isdigit()`` is True and ``int("²")`` then fails; ``int(" 5")``, ``int("5_0")``
and pydantic's int parsing take spaces, underscores and ``5.0``). A field given more than
once is refused too: which of two values a form meant is not for the desk to guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic_core import PydanticCustomError
from starlette.datastructures import FormData

from ._errors import BadInput

#: The largest id a route accepts: DuckDB's integers (a bigger one is no row, not an overflow).
MAX_ID = 2**31 - 1
#: An id as the desk writes it: ASCII digits, no more than MAX_ID has.
_ID = re.compile(r"[0-9]{1,10}")
#: The longest reason kept with a decision.
MAX_REASON = 2000
#: The most reports ticked at once.
MAX_RECORDS = 10_000


def choice(name: str, value: str | None, allowed: Iterable[str]) -> str | None:
    """``value`` when it is one of ``allowed``; None when empty."""
    options = tuple(allowed)
    if not value:
        return None
    if value not in options:
        raise BadInput(name, f"must be one of {', '.join(options)} (got {value[:40]!r})")
    return value


def single(form: FormData, name: str) -> str:
    """The one value of field ``name`` ("" when absent)."""
    values = form.getlist(name)
    if len(values) > 1:
        raise BadInput(name, f"give one value (it was given {len(values)} times)")
    return values[0] if values and isinstance(values[0], str) else ""


def text(form: FormData, name: str, limit: int, required: bool = False, one_line: bool = False) -> str:
    """A text field, with the browser's CRLF line ends made LF."""
    found = single(form, name).replace("\r\n", "\n").replace("\r", "\n")
    if required and not found.strip():
        raise BadInput(name, "must not be empty")
    if len(found) > limit:
        raise BadInput(name, f"at most {limit:,} characters (got {len(found):,})")
    if one_line and "\n" in found.strip():
        raise BadInput(name, "one line")
    return found.strip() if one_line else found


def reason(form: FormData, required: bool = False) -> str | None:
    """A decision's reason: one printable line, as the audit shows it (no NUL, no U+202E
    turning the history around)."""
    found = text(form, "reason", MAX_REASON, required=required, one_line=True)
    bad = next((c for c in found if not c.isprintable()), None)
    if bad is not None:
        raise BadInput("reason", f"one line of printable characters (it has U+{ord(bad):04X})")
    return found or None


def identifier(form: FormData, name: str) -> int:
    """A cluster's id from a form field."""
    value = single(form, name)
    if not _ID.fullmatch(value) or not 0 < int(value) <= MAX_ID:
        raise BadInput(name, f"a cluster id is a number from 1 to {MAX_ID:,} in the digits 0-9 (got {value[:20]!r})")
    return int(value)


def number(form: FormData, name: str) -> int:
    """A record's number (a correction's) from a form field, as strictly as an id."""
    value = single(form, name)
    if not _ID.fullmatch(value) or not 0 < int(value) <= MAX_ID:
        raise BadInput(name, f"a number from 1 to {MAX_ID:,} in the digits 0-9 (got {value[:20]!r})")
    return int(value)


def path_id(value: object) -> object:
    """A path's id before pydantic reads it as an int (with ``Path(ge=1, le=MAX_ID)``): the
    digits 0-9 only."""
    if isinstance(value, str) and not _ID.fullmatch(value):
        raise PydanticCustomError("ascii_id", "an id is a number from 1 to {limit} in the digits 0-9",
                                  {"limit": f"{MAX_ID:,}"})
    return value


def records(form: FormData) -> list[str]:
    """The reports ticked (``collector:id``)."""
    chosen = [value for value in form.getlist("records") if isinstance(value, str) and value]
    if not chosen:
        raise BadInput("records", "tick at least one report")
    if len(chosen) > MAX_RECORDS:
        raise BadInput("records", f"at most {MAX_RECORDS:,} at a time")
    return chosen
