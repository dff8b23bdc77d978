"""The platform's feedback routes over HTTP, for one owner: ``GET /v1/feedback`` and
``PATCH /v1/feedback/:id``.

A refusal is named by the owner's variable and the status, never by the token; a body the
platform sent back is not echoed (it may quote a row).
"""

from __future__ import annotations

import ssl
from functools import cache
from typing import Any
from urllib.parse import quote

import httpx

from ...core import GaveUp, with_retries
from ._platform_api import NotFound, PlatformError, Refused, listing


@cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every owner's client: making one loads the CA bundle (~0.3 s), and a
    run opens a client per owner."""
    return httpx.create_ssl_context()


class HttpFeedbackApi:
    def __init__(self, url: str, token: str, variable: str, *, retries: int = 4, backoff: float = 0.5,
                 timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.variable = variable
        self.retries, self.backoff = retries, backoff
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers={"authorization": f"Bearer {token}"},
                                  verify=_tls())

    def close(self) -> None:
        self._http.close()

    def list(self, status: str | None, instance_id: str | None, limit: int) -> list[dict[str, Any]]:
        params = listing(status, instance_id, limit)
        body = self._request("GET", "/v1/feedback", params=params).json()
        rows = body.get("feedback") if isinstance(body, dict) else None
        if not isinstance(rows, list):
            raise PlatformError(f"{self.url}: GET /v1/feedback for ${self.variable} did not answer {{\"feedback\": [...]}}")
        return rows

    def resolve(self, feedback_id: str, status: str, issue_url: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"status": status}
        if issue_url is not None:
            body["issue_url"] = issue_url
        answer = self._request("PATCH", f"/v1/feedback/{quote(feedback_id, safe='')}", json=body).json()
        return answer if isinstance(answer, dict) else {}

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        what = f"{method} {path.split('?')[0]} for ${self.variable}"
        try:
            response = with_retries(lambda: self._http.request(method, path, **kwargs), self.retries, self.backoff, 60.0)
        except GaveUp as failed:
            if failed.response is None:
                raise PlatformError(f"{self.url} is unreachable ({what}): {type(failed.error).__name__}") from None
            raise PlatformError(
                f"{self.url} answered {failed.response.status_code} to {what}; gave up after {failed.tries} tries") from None
        if response.status_code in (401, 403):
            meaning = "is not an owner's token" if response.status_code == 401 else "may not do this (no scope)"
            raise Refused(f"{self.url} refused {what} ({response.status_code}): the token {meaning}")
        if response.status_code == 404:
            raise NotFound(f"{self.url}: {what}: not found")
        if response.status_code >= 400:
            raise PlatformError(f"{self.url} answered {response.status_code} to {what}")
        return response
