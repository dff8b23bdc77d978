"""The collector envelope: AFP's record shape, used around every agent-written dialect.

An AFP collector record is ``{id, received_at, service, account, source, feedback}``. Our
collector stores Agent Feedback Spec and SEP-2369 bodies in the same envelope, so one helper
unwraps all three and one schema (``schemas/envelope.schema.json``) checks the outer fields.
"""

from __future__ import annotations

from typing import Any

from ..core import Problem, shared_schemas

SCHEMAS = shared_schemas()


def is_enveloped(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("feedback"), dict)


def payload(obj: Any) -> Any:
    """The body the agent wrote: inside the envelope when there is one."""
    return obj["feedback"] if is_enveloped(obj) else obj


def validate_outer(obj: dict[str, Any]) -> list[Problem]:
    return SCHEMAS.check("envelope.schema.json", obj)


def prefixed(problems: list[Problem], prefix: str) -> list[Problem]:
    return [Problem(f"{prefix}.{p.path}" if p.path else prefix, p.message) for p in problems]
