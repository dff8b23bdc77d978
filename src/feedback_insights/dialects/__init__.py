"""The wire dialects agents and people file feedback in, each one module.

Every module has the same three functions:

- ``looks_like(obj) -> bool``: cheap structural test used by auto-detection;
- ``validate(obj, max_bytes=...) -> list[Problem]``: every problem, each with a dotted path;
- ``normalise(obj, origin) -> list[CanonicalRecord]``: one record per report (a SEP-2369
  submission carries several items, so the result is a list for every dialect).

``afs`` on the command line covers both the Agent Feedback Spec v1 body and the MCP SEP-2369
shape it accepts; the records say which one (``dialect`` ``afs`` or ``sep2369``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ..problems import Problem
from . import afp, afs, rfc026, sep2369, session
from .common import DEFAULT_MAX_BYTES, Origin

__all__ = ["CHOICES", "DEFAULT_MAX_BYTES", "MODULES", "Origin", "detect", "undetected"]

#: Auto-detection tries these in order. Their ``looks_like`` tests exclude one another, so the
#: order is by expected volume: AFP first.
MODULES: dict[str, ModuleType] = {
    "afp": afp,
    "afs": afs,
    "sep2369": sep2369,
    "rfc026": rfc026,
    "session": session,
}

#: What ``--dialect`` accepts, and the modules each name covers.
CHOICES: dict[str, tuple[str, ...]] = {
    "auto": tuple(MODULES),
    "afp": ("afp",),
    "afs": ("afs", "sep2369"),
    "session": ("session",),
    "rfc026": ("rfc026",),
}

def detect(obj: Any, choice: str = "auto") -> str | None:
    """The dialect module name for ``obj``, or None when nothing in ``choice`` fits.

    With an explicit choice that covers one module, that module is used even when the object
    does not look like it, so its validator explains what is wrong.
    """
    names = CHOICES[choice]
    for name in names:
        if MODULES[name].looks_like(obj):
            return name
    return None if choice == "auto" else names[0]


def undetected(obj: Any) -> list[Problem]:
    if not isinstance(obj, dict):
        return [Problem("", "must be an object")]
    keys = ", ".join(sorted(obj)[:8]) or "no fields"
    return [Problem("", f"matches no known feedback dialect (fields: {keys})")]
