"""Answers in AFP's shapes, and bodies read within a limit."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
from fastapi import Path, Request, Response
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import ClientDisconnect

from ..core import Problem, depth_problem

#: ``application/json`` and the structured ``application/*+json`` types, parameters allowed. Not
#: a substring match: ``text/plain; charset=json`` is what a web page may POST cross-site
#: without a preflight.
_JSON_MEDIA_TYPE = re.compile(r"application/(?:[a-z0-9!#$&^_.+-]+\+)?json", re.IGNORECASE)

#: An id in a path (a known issue's, a record's): URL-safe characters only, so it reaches the
#: route as it was written (the pipeline's are ``fi-cluster-<n>``, ours ``fb_<ulid>``), and no
#: longer than a known issue's 200.
PATH_ID_PATTERN = r"^[A-Za-z0-9._:~-]{1,200}$"
PathId = Annotated[str, Path(pattern=PATH_ID_PATTERN, description="1 to 200 of A-Z a-z 0-9 . _ : ~ -")]

#: A record id the collector stores (``POST /v1/records``; agents' are ``fb_<ulid>``): at most AFP's
#: 128 characters, URL-safe so that it is written in a path as it is, and starting with a letter
#: or digit (never ``.``, ``..`` or an option's ``-``).
RECORD_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:~-]{0,127}$"
RECORD_ID_RULE = "1 to 128 of A-Z a-z 0-9 . _ : ~ -, the first a letter or digit"
#: A record id in ``DELETE /v1/records/{id}``: any id a store may hold, percent-encoded (a collector
#: from before :data:`RECORD_ID_PATTERN` stored any 1 to 128 characters, ``/`` included).
StoredId = Annotated[str, Path(pattern=r"^[\s\S]{1,128}$",
                               description="the record's id, 1 to 128 characters, percent-encoded")]


class AnyText(Convertor[str]):
    """A path parameter that is the rest of the path, whatever it holds: Starlette's ``path``
    (``.*``) stops at a newline, and an id may hold one. Route it as ``{name:any}``."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("any", AnyText())


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


def invalid(code: str, problems: Iterable[Problem]) -> Response:
    """400 naming every problem and its path (``invalid_feedback`` or ``invalid_request``)."""
    problems = list(problems)
    return error(400, code, "; ".join(map(str, problems)), [p.as_dict() for p in problems])


def unavailable() -> Response:
    """503 for a genuine server fault: AFP says retry once, later."""
    return error(503, "unavailable", "Feedback could not be stored. Retry once later.", headers={"retry-after": "5"})


def too_deep(body: Any) -> list[Problem]:
    """The nesting limit, checked before anything walks the body recursively (validation,
    scrubbing, storing): ``[problem]`` at the first path nested too deep, else ``[]``."""
    problem = depth_problem(body)
    return [problem] if problem else []


def too_large(max_bytes: int) -> Response:
    """413: the body (or a tool call's arguments, as JSON) is over ``max_bytes``."""
    return error(413, "payload_too_large", f"The body is limited to {max_bytes} bytes")


def is_json(content_type: str) -> bool:
    return _JSON_MEDIA_TYPE.fullmatch(content_type.partition(";")[0].strip()) is not None


def json_response(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status, media_type="application/json")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def read_json(request: Request, max_bytes: int) -> tuple[Any, Response | None]:
    """The parsed body, or the error to answer with (wrong type, over ``max_bytes``, not JSON)."""
    if not is_json(request.headers.get("content-type", "")):
        return None, error(415, "unsupported_media_type", "Content-Type must be application/json or application/*+json")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        return None, too_large(max_bytes)
    raw = bytearray()
    try:
        async for chunk in request.stream():  # never holds more than the limit in memory
            raw += chunk
            if len(raw) > max_bytes:
                return None, too_large(max_bytes)
    except ClientDisconnect:  # gone, or cut off by the body timeout: not a fault of ours
        return None, error(408, "request_timeout", "The body did not arrive")
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError:
        return None, error(400, "invalid_json", "Body is not valid JSON")
