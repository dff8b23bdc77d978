"""What the routes share, and how one report is accepted: scrubbed, stored, matched.

Matching by meaning needs the submission's vector, which the embedder computes off the event
loop: accepting is a coroutine, so a request waits for its vector without holding the others
up, and never longer than ``[collector] known_issue_wait`` (then record ids and key terms
decide, as they do when the model is unavailable)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import Request, Response

from ..clusters import record_text
from ..config import CollectorConfig, EmbeddingConfig
from ..core import CanonicalRecord
from ..ingest import content_hash, dialects
from ..ingest.dialects import Origin
from ..privacy import Pseudonymiser, Redactor
from ._embedder import SubmissionEmbedder
from ._http import error, now_iso
from ._matching import KnownIssues
from ._rate_limit import RateLimiter
from ._store import Marks, Store

#: What a refused re-send is told, wherever it arrives.
ERASED_MESSAGE = "this report was erased at its owner's request and is not stored again"


def _too_many(wait: int, message: str) -> Response | None:
    return error(429, "rate_limited", message, headers={"retry-after": str(wait)}) if wait else None


def client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _origin(stored: dict[str, Any]) -> Origin:
    return Origin("collector", stored["received_at"], service=stored.get("service"))


def retry_key(module: str, stored: dict[str, Any], canonical: list[CanonicalRecord]) -> str | None:
    """What makes a report a retry of an earlier one, exactly as the warehouse decides it when
    it pulls them (``ingest/_store.py``): the same canonical service and session_id, and the
    same content hash of what the collector keeps (scrubbed, so two reports that differ only
    in a pasted secret are one). The account is not part of it: AFP §4.1's duplicate is "same
    session_id and content". None when the report names no session."""
    session_id = canonical[0].get("session_id") if canonical else None
    if session_id is None:
        return None
    return content_hash([canonical[0].get("service"), session_id, content_hash(dialects.payload(module, stored))])


#: A prepared report: its dialect, as stored, and as it reads.
_Prepared = tuple[str, dict[str, Any], list[CanonicalRecord]]


class Collector:
    """The configuration, the store, the known issues, the limiters, the embedder. ``embedding``
    is the pipeline's ``[embedding]`` (the model its published meanings are in)."""

    def __init__(self, config: CollectorConfig, pseudonymise: Pseudonymiser, store: Store,
                 embedding: EmbeddingConfig = EmbeddingConfig()) -> None:
        self.config = config
        self.pseudonymise = pseudonymise
        self.store = store
        self.embedder = SubmissionEmbedder(embedding)
        self.reload_known_issues()
        self.per_account = RateLimiter(config.rate_limit_per_account)
        self.per_ip = RateLimiter(config.rate_limit_per_ip)
        store.rekey(self._stored_retry_key)  # once, for a file from before retries were rows

    def reload_known_issues(self) -> None:
        """Read the known issues again; the model starts loading when one has a meaning."""
        self.known = KnownIssues(self.store.known_issues(), self.embedder.space)
        if self.known.by_meaning(any_service=True):
            self.embedder.start()

    async def known_issues_ready(self) -> None:
        """Once the known issues are recognised by meaning, the model is loaded (or known to be
        unavailable): what the pipeline puts is answered by the next submission."""
        if self.known.by_meaning(any_service=True):
            await self.embedder.ready()

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

    async def accept(self, envelope: dict[str, Any], module: str) -> tuple[str, bool, dict[str, Any] | None] | None:
        """Scrub, store and match an agent's report in the collector envelope: its id (the first
        report's, for a retry, which is stored as a row of its own), whether it is a new report,
        and the known issue it belongs to; None when the pipeline erased it before (not stored)."""
        return (await self.accept_batch([(envelope, module)], owner=None))[0]

    async def accept_batch(self, envelopes: list[tuple[dict[str, Any], str]],
                           owner: str | None) -> list[tuple[str, bool, dict[str, Any] | None] | None]:
        """:meth:`accept` for records in the collector envelope with their dialects, stored in one
        transaction as ``owner``'s (the hash of the ingest key that forwarded them); raises
        :class:`~._store.Conflict` (nothing stored) for an id already stored with other content.
        A record the pipeline erased before (its id, or its account's same content) is not
        stored: None in its place."""
        prepared = [(module, *self._scrubbed(envelope, module)) for envelope, module in envelopes]
        stored = self.store.add_batch([(record, retry_key(module, record, canonical))
                                       for module, record, canonical in prepared], owner,
                                      [self.erasure_marks(record) for _, record, _ in prepared])
        known = await self._known([(item, answer[0]) for item, answer in zip(prepared, stored, strict=True)
                                   if answer is not None])
        return [None if answer is None else (answer[0], answer[1], known.pop(0))
                for answer in stored]

    def erasure_marks(self, stored: dict[str, Any]) -> Marks:
        """The erasure ledger's marks of a record as stored (scrubbed, its account a pseudonym):
        keyed HMACs of its id, and of its account with the content hash of the body inside it
        (the warehouse ledger's idea: the same text from another account is another person's
        report; no account is an account of its own). Never the values themselves."""
        marks = [("id", self.pseudonymise.erasure_mark("id", stored["id"]))]
        if isinstance(stored.get("feedback"), dict):
            account = stored.get("account")
            digest = content_hash(stored["feedback"])
            marks.append(("content", self.pseudonymise.erasure_mark(
                "content", account if isinstance(account, str) else None, digest)))
        return marks

    def _scrubbed(self, envelope: dict[str, Any], module: str) -> tuple[dict[str, Any], list[CanonicalRecord]]:
        """The record as it is stored (scrubbed, its account pseudonymised) and as it reads,
        normalised before it is stored: nothing is kept that cannot be read."""
        scrubbed = Redactor(self.pseudonymise).value(envelope)
        return scrubbed, dialects.dialect(module).normalise(scrubbed, _origin(scrubbed))

    async def _known(self, stored: list[tuple[_Prepared, str]]) -> list[dict[str, Any] | None]:
        """The known issue each stored report belongs to; a retry's is its first report's, the id
        known issues list (the id it is answered with). The reports of a service with a known
        issue recognised by meaning are embedded first, together."""
        known = self.known
        reports = []
        for (module, record, canonical), record_id in stored:
            if record_id != record["id"]:
                canonical = dialects.dialect(module).normalise({**record, "id": record_id}, _origin(record))
            reports.append(canonical)
        texts = [record_text(dict(r)) if known.by_meaning(r.get("service")) else None for rs in reports for r in rs]
        vectors: list[Any] | None = None  # None: matched by record ids and terms only
        if any(text is not None for text in texts):
            wanted = [text for text in texts if text]
            embedded = await self.embedder.vectors(wanted, self.config.known_issue_wait) if wanted else []
            if embedded is not None:
                found = iter(embedded)
                vectors = [next(found) if text else None for text in texts]
        answers, start = [], 0
        for canonical in reports:
            answers.append(known.match(canonical, None if vectors is None else vectors[start : start + len(canonical)]))
            start += len(canonical)
        return answers

    def delete(self, record_id: str, by: str | None) -> bool:
        """Delete a record and those of its retries ``by`` may delete (an ingest key's hash: what
        it forwarded; None, the pipeline: any); False: no such record, or not ``by``'s. A
        service's deletion leaves tombstones in the pull feed. The pipeline's is an erasure it has
        made itself: no tombstone keeps the ids, the ledger keeps the marks of what it removed,
        and none of it is stored again."""
        if not self.store.delete(record_id, now_iso(), by, self.erasure_marks):
            return False
        self.reload_known_issues()  # they no longer list the deleted ids
        return True

    def _stored_retry_key(self, stored: dict[str, Any]) -> str | None:
        """:func:`retry_key` of a record as stored; None for one no dialect reads (a store of
        someone else's may hold anything: it is then no retry, and has none)."""
        module = dialects.detect(stored) or "afp"
        try:
            return retry_key(module, stored, dialects.dialect(module).normalise(stored, _origin(stored)))
        except (KeyError, TypeError, ValueError, RecursionError):
            return None
