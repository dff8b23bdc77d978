"""Answers in AFP's shapes, and bodies read within a limit."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from fastapi import Request, Response


class Refused(Exception):
    """Raised by a dependency to answer at once with ``response`` (an AFP error)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def error(status: int, code: str, message: str, details: list[dict[str, str]] | None = None,
          headers: dict[str, str] | None = None) -> Response:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return Response(orjson.dumps({"error": body}), status, headers=headers, media_type="application/json")


def json_response(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status, media_type="application/json")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def read_json(request: Request, max_bytes: int) -> tuple[Any, Response | None]:
    """The parsed body, or the error to answer with (wrong type, over ``max_bytes``, not JSON)."""
    content_type = request.headers.get("content-type", "")
    if "json" not in content_type.lower():
        return None, error(415, "unsupported_media_type", "Content-Type must be application/json")
    too_large = error(413, "payload_too_large", f"The body is limited to {max_bytes} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        return None, too_large
    raw = bytearray()
    async for chunk in request.stream():  # never holds more than the limit in memory
        raw += chunk
        if len(raw) > max_bytes:
            return None, too_large
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError:
        return None, error(400, "invalid_json", "Body is not valid JSON")
