"""The wire dialects agents and people file feedback in, each one module.

A dialect is a plugin (entry-point group ``feedback_insights.dialects``, or
``DIALECTS.register`` in code) with three functions:

- ``looks_like(obj) -> bool``: cheap structural test used by auto-detection;
- ``validate(obj, max_bytes=..., size=None) -> list[Problem]``: every problem, each with a dotted path;
- ``normalise(obj, origin) -> list[CanonicalRecord]``: one record per report (a SEP-2369
  submission carries several items, so the result is a list for every dialect);

and optionally ``payload(obj)`` (what the reporter wrote, without a receiver's envelope;
default: the object itself), ``ORDER`` (auto-detection tries lower first; default 100),
``CHOICE`` (the ``--dialect`` name it travels under; default its own name),
``NAMES_SERVICE`` (false when no report of it ever names its service, so a source reading it
must set ``service``; default true), and where its reports keep their people and their
service, as dotted paths into the report as received (``*`` for every item of a list; see
:mod:`feedback_insights.ingest._declared`): ``ACCOUNT_FIELDS`` (the account its records'
``account`` comes from), ``IDENTITY_FIELDS`` (other fields naming a person) — both pseudonymised
before anything is stored, whatever their key is called — and ``SERVICE_FIELDS`` (checked to be
a service name, problems at their own path). Default: none declared; the record's ``account`` is
pseudonymised and its ``service`` checked all the same.

A record whose report names no service has ``service`` None (or ``origin.service``, which
ingestion leaves unset): ingestion then applies the source's ``service_by_tool`` and
``service``, and quarantines what still has none. Likewise ``origin.received_at`` is for
reports that carry no time of their own: the source's rule (see ``FileDropConfig``).

``afs`` on the command line covers both the Agent Feedback Spec v1 body and the MCP SEP-2369
shape it accepts; the records say which one (``dialect`` ``afs`` or ``sep2369``).
"""

from __future__ import annotations

from typing import Any, Protocol

from ...core import DIALECTS, CanonicalRecord, Problem
from . import afp, afs, rfc026, sep2369, session  # the built-ins (registered by entry point like any other)
from .common import Origin

__all__ = [
    "Dialect",
    "Origin",
    "afp",
    "afs",
    "choice_name",
    "choices",
    "detect",
    "dialect",
    "payload",
    "rfc026",
    "sep2369",
    "session",
    "undetected",
]


class Dialect(Protocol):
    def looks_like(self, obj: Any) -> bool: ...

    def validate(self, obj: Any, max_bytes: int = ..., size: int | None = None) -> list[Problem]: ...

    def normalise(self, obj: Any, origin: Origin) -> list[CanonicalRecord]: ...


def dialect(name: str) -> Dialect:
    return DIALECTS.get(name)


def choices() -> dict[str, tuple[str, ...]]:
    """What ``--dialect`` accepts, and the dialects each name covers."""
    return DIALECTS.choices()


def choice_name(name: str) -> str:
    """The ``--dialect`` name a dialect travels under (``sep2369`` under ``afs``)."""
    return getattr(dialect(name), "CHOICE", None) or name


def detect(obj: Any, choice: str = "auto") -> str | None:
    """The dialect name for ``obj``, or None when nothing in ``choice`` fits.

    With an explicit choice that covers one dialect, that dialect is used even when the object
    does not look like it, so its validator explains what is wrong.
    """
    names = choices()[choice]
    for name in names:
        if dialect(name).looks_like(obj):
            return name
    return None if choice == "auto" else names[0]


def payload(name: str, obj: Any) -> Any:
    """What the reporter wrote, without any receiver's envelope around it."""
    unwrap = getattr(dialect(name), "payload", None)
    return unwrap(obj) if unwrap else obj


def undetected(obj: Any) -> list[Problem]:
    if not isinstance(obj, dict):
        return [Problem("", "must be an object")]
    keys = ", ".join(sorted(obj)[:8]) or "no fields"
    return [Problem("", f"matches no known feedback dialect (fields: {keys})")]
