"""What the routes share, and how one report is accepted: scrubbed, stored, matched."""

from __future__ import annotations

import time
from typing import Any

from fastapi import Request, Response

from ..config import CollectorConfig
from ..ingest import content_hash, dialects
from ..ingest.dialects import Origin
from ..privacy import Pseudonymiser, Redactor
from ._http import error
from ._matching import KnownIssues
from ._rate_limit import RateLimiter
from ._store import Store


def _too_many(wait: int, message: str) -> Response | None:
    return error(429, "rate_limited", message, headers={"retry-after": str(wait)}) if wait else None


def client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


class Collector:
    """The configuration, the store, the known issues, the limiters."""

    def __init__(self, config: CollectorConfig, pseudonymise: Pseudonymiser, store: Store) -> None:
        self.config = config
        self.pseudonymise = pseudonymise
        self.store = store
        self.known = KnownIssues(store.known_issues())
        self.per_account = RateLimiter(config.rate_limit_per_account)
        self.per_ip = RateLimiter(config.rate_limit_per_ip)

    def reload_known_issues(self) -> None:
        self.known = KnownIssues(self.store.known_issues())

    def limited(self, account: str | None, ip: str) -> Response | None:
        """Count one submission (or failed authentication: ``account`` None) against the
        limits; the 429 to answer when it is one too many."""
        now = time.monotonic()
        wait = max(self.per_account.wait(account, now) if account else 0, self.per_ip.wait(ip, now))
        return _too_many(wait, "Too many feedback submissions")

    def blocked(self, ip: str) -> Response | None:
        """The 429 for an address over its limit (after failed authentications), counting
        nothing: a key route checks this before the key, so guessing learns nothing there."""
        return _too_many(self.per_ip.blocked(ip, time.monotonic()), "Too many requests from this address")

    def failed_authentication(self, ip: str, refusal: Response) -> Response:
        """A failed authentication counts towards the address's limit: ``refusal`` (401), or the
        429 once the address is over it."""
        return _too_many(self.per_ip.wait(ip, time.monotonic()), "Too many failed authentications") or refusal

    def accept(self, envelope: dict[str, Any], module: str) -> tuple[str, bool, dict[str, Any] | None]:
        """Scrub, store and match one report in the collector envelope: its id (the first
        report's, for a retry), whether it was new, and the known issue it belongs to."""
        body = dialects.payload(module, envelope)
        session_id = body.get("session_id") or body.get("sessionId") if isinstance(body, dict) else None
        dedupe = None
        if session_id:
            dedupe = content_hash([envelope.get("service"), envelope.get("account"), session_id, body])
        scrubbed = Redactor(self.pseudonymise).value(envelope)
        origin = Origin("collector", scrubbed["received_at"], service=scrubbed.get("service"))
        normalise = dialects.dialect(module).normalise
        canonical = normalise(scrubbed, origin)  # before storing: nothing is kept that cannot be read
        record_id, created = self.store.add(scrubbed, dedupe)
        if record_id != scrubbed["id"]:  # a retry: it is the first report that known issues list
            canonical = normalise({**scrubbed, "id": record_id}, origin)
        return record_id, created, self.known.match(canonical)
