"""Reading query and form values, each refusal naming its field (a 400 page, never a 500)."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.datastructures import FormData

from ._errors import BadInput

#: The largest id a route accepts: DuckDB's integers (a bigger one is no row, not an overflow).
MAX_ID = 2**31 - 1
#: The longest reason kept with a decision.
MAX_REASON = 2000


def choice(name: str, value: str | None, allowed: Iterable[str]) -> str | None:
    """``value`` when it is one of ``allowed``; None when empty."""
    options = tuple(allowed)
    if not value:
        return None
    if value not in options:
        raise BadInput(name, f"must be one of {', '.join(options)} (got {value[:40]!r})")
    return value


def text(form: FormData, name: str, limit: int, required: bool = False, one_line: bool = False) -> str:
    """A text field, with the browser's CRLF line ends made LF."""
    found = str(form.get(name) or "").replace("\r\n", "\n").replace("\r", "\n")
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
    """A cluster's or draft's id from a form field."""
    value = form.get(name)
    if not isinstance(value, str) or not value.strip().isdigit() or not 0 < int(value) <= MAX_ID:
        raise BadInput(name, "choose one (a cluster id)")
    return int(value)


def records(form: FormData) -> list[str]:
    """The reports ticked (``collector:id``)."""
    chosen = [value for value in form.getlist("records") if isinstance(value, str) and value]
    if not chosen:
        raise BadInput("records", "tick at least one report")
    if len(chosen) > 10_000:
        raise BadInput("records", "at most 10,000 at a time")
    return chosen
