"""Accounts become keyed pseudonyms, so demand is counted by distinct customers without
knowing who they are.

HMAC-SHA256 with a key from configuration: stable across runs (the same account is always the
same pseudonym, so distinct-account counts stay exact) and not reversible or guessable without
the key (a plain hash of a short account id could be brute-forced).

The same key also stands in for an identifier that carries a secret or an email (a session id
that is someone's address): ``idh_`` + HMAC over a separate domain, so the record keeps one
stable identity — re-ingesting it is still recognised as already stored — and nothing secret
reaches disk. The domain keeps an id's pseudonym from ever equalling an account's.

A warehouse remembers which key its pseudonyms were made with, as a keyed fingerprint (an HMAC
of a fixed label: it tells keys apart and reveals none), so that a process given another key is
refused instead of counting every customer twice.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import TYPE_CHECKING

from ..core import now_utc

if TYPE_CHECKING:
    from ..warehouse import Warehouse

PREFIX = "acct_"
_PSEUDONYM = re.compile(rf"^{PREFIX}[0-9a-f]{{24}}$")
#: Pseudonyms of identifiers: another prefix, and the HMAC over another domain.
IDENTIFIER_PREFIX = "idh_"
_IDENTIFIER_DOMAIN = b"feedback-insights identifier\0"
_IDENTIFIER_PSEUDONYM = re.compile(rf"^{IDENTIFIER_PREFIX}[0-9a-f]{{24}}$")
#: What the key's fingerprint is an HMAC of: a label no account or identifier is.
_FINGERPRINT_DOMAIN = b"feedback-insights key fingerprint\0"


class Pseudonymiser:
    #: Accounts remembered: a few thousand customers file most of the feedback.
    CACHE_SIZE = 65_536

    def __init__(self, key: str | bytes) -> None:
        if not key:
            raise ValueError("the pseudonymisation key must not be empty")
        self._key = key.encode() if isinstance(key, str) else key
        self._cache: dict[str, str] = {}

    def __call__(self, account: str) -> str:
        """The account's pseudonym; one that already is a pseudonym (a collector pseudonymised
        it with the same key) is kept, so every path to the warehouse gives the same value."""
        if is_pseudonym(account):
            return account
        pseudonym = self._cache.get(account)
        if pseudonym is None:
            digest = hmac.new(self._key, account.encode("utf-8", errors="surrogatepass"), hashlib.sha256)
            pseudonym = PREFIX + digest.hexdigest()[:24]
            if len(self._cache) >= self.CACHE_SIZE:
                self._cache.clear()
            self._cache[account] = pseudonym
        return pseudonym

    def identifier(self, value: str) -> str:
        """The pseudonym of an identifier that must not be stored as it is; one that already is
        such a pseudonym is kept (scrubbing is idempotent)."""
        if _IDENTIFIER_PSEUDONYM.match(value):
            return value
        message = _IDENTIFIER_DOMAIN + value.encode("utf-8", errors="surrogatepass")
        return IDENTIFIER_PREFIX + hmac.new(self._key, message, hashlib.sha256).hexdigest()[:24]

    def erasure_mark(self, kind: str, *parts: str | None) -> str:
        """The erasure ledger's mark (:meth:`feedback_insights.warehouse.Ledger.mark`, with this
        key) of what was erased, ``kind`` naming what ``parts`` are (a record id; an account and
        a content hash): for the collector's own ledger, which holds the key this way."""
        from ..warehouse import Ledger  # DuckDB's import is heavy, and scrubbing never needs it

        return Ledger(self._key).mark(kind, *parts)

    def fingerprint(self) -> str:
        """The key's fingerprint: equal for equal keys, and no help in finding the key (anyone
        who could test a guess against it could test it against a pseudonym as well)."""
        return "hmac-sha256:" + hmac.new(self._key, _FINGERPRINT_DOMAIN, hashlib.sha256).hexdigest()[:32]

    def made(self, warehouse: Warehouse) -> bool:
        """Whether ``warehouse``'s pseudonyms are this key's. A warehouse that records no key yet
        (new, or from before keys were recorded) is told this one's, and so is this key's from
        then on; call it with the warehouse held (its lock), before storing a pseudonym."""
        fingerprint = self.fingerprint()
        warehouse.con.execute(
            "INSERT INTO key_fingerprint VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING", [fingerprint, now_utc()]
        )
        [(recorded,)] = warehouse.con.execute("SELECT fingerprint FROM key_fingerprint").fetchall()
        return bool(recorded == fingerprint)

    def __repr__(self) -> str:  # never show the key
        return "Pseudonymiser(<key>)"


def is_pseudonym(value: str) -> bool:
    return bool(_PSEUDONYM.match(value))
