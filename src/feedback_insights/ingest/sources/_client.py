"""The pipeline's side of a collector: pull pages of records and tombstones, put known issues.

Retries 429 and 5xx (and connection failures) with exponential backoff that honours
Retry-After; a wrong key or an unreachable collector becomes one clear :class:`CollectorError`.
"""

from __future__ import annotations

from typing import Any, Self
from urllib.parse import quote

import httpx

from ...core import GaveUp, with_retries


class CollectorError(RuntimeError):
    """The collector refused, or could not be reached after the retries."""


class CollectorClient:
    def __init__(
        self, url: str, key: str, *, retries: int = 4, backoff: float = 0.5, timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self._http = httpx.Client(
            base_url=self.url, timeout=timeout, headers={"authorization": f"Bearer {key}"}, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pull(self, after: str | None, limit: int) -> dict[str, Any]:
        """One page: ``{"records", "deleted", "next_cursor", "has_more"}`` (records, a retry
        with its ``duplicate_of``; tombstones ``{"id", "deleted_at"}``; see
        ``schemas/collector/records_page.schema.json``)."""
        params: dict[str, Any] = {"limit": limit}
        if after:
            params["after"] = after
        return self._request("GET", "/v1/records", params=params).json()

    def put_known_issue(self, issue: dict[str, Any], match: dict[str, Any]) -> None:
        self._request("PUT", f"/v1/known-issues/{issue['id']}", json={**issue, "match": match})

    def delete_record(self, record_id: str) -> bool:
        """Erase one record from the collector's store (the pipeline key may erase any record);
        whether it was there. An id of dots only is sent as ``%2E``s: clients resolve a ``.``
        or ``..`` path segment away."""
        segment = "%2E" * len(record_id) if record_id.strip(".") == "" else quote(record_id, safe="")
        return self._request("DELETE", f"/v1/records/{segment}", allow={404}).status_code != 404

    def delete_known_issue(self, issue_id: str) -> None:
        self._request("DELETE", f"/v1/known-issues/{issue_id}", allow={404})

    def _request(self, method: str, path: str, allow: frozenset[int] | set[int] = frozenset(), **kwargs: Any) -> httpx.Response:
        try:
            response = with_retries(lambda: self._http.request(method, path, **kwargs), self.retries, self.backoff, 60.0)
        except GaveUp as failed:
            if failed.response is None:
                raise CollectorError(f"collector {self.url} is unreachable: {failed.error}") from None
            raise CollectorError(
                f"collector {self.url} answered {failed.response.status_code} {path}; gave up after {failed.tries} tries"
            ) from None
        if response.status_code in (401, 403):
            raise CollectorError(f"collector {self.url} refused the key ({response.status_code}): check the pipeline key")
        if response.status_code >= 400 and response.status_code not in allow:
            raise CollectorError(f"collector {self.url} answered {response.status_code} to {method} {path}: {response.text[:200]}")
        return response
