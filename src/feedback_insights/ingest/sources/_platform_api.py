"""What the platform source and write-back need of the platform, for one owner, over HTTP
or MCP; and how a failure is told: refused (401, 403), not found (404), or any other."""

from __future__ import annotations

from typing import Any, Protocol

from ._client import CollectorError


class PlatformError(CollectorError):
    """The platform refused an owner or could not be reached; the text names the owner's
    variable, never the token."""


class Refused(PlatformError):
    """401 or 403: this owner's token may not do it."""


class NotFound(PlatformError):
    """404: no such instance or row for this owner."""


class FeedbackApi(Protocol):
    """What the source and write-back need of the platform, over HTTP or MCP, for one owner."""

    def list(self, status: str | None, instance_id: str | None, limit: int) -> list[dict[str, Any]]: ...

    def resolve(self, feedback_id: str, status: str, issue_url: str | None) -> dict[str, Any]: ...

    def close(self) -> None: ...


def listing(status: str | None, instance_id: str | None, limit: int) -> dict[str, Any]:
    """The arguments of one listing, as ``GET /v1/feedback`` and ``list_feedback`` both take
    them: ``limit`` always, ``status`` and ``instance_id`` only when narrowed to one."""
    return {"limit": limit, **({"status": status} if status else {}), **({"instance_id": instance_id} if instance_id else {})}
