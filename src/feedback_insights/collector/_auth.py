"""Who is calling: agents by their own API key (per the auth mode), services and the pipeline by
their keys. Keys are compared by their SHA-256; the configuration holds only hashes."""

from __future__ import annotations

import hashlib
from typing import Any

from fastapi import Depends, Request, Response

from ..config import CollectorConfig
from ._collector import Collector, client_ip
from ._http import Refused, error


def hash_key(key: str) -> str:
    """How a key is written in the configuration and compared: never the key itself."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def requires_key(collector: Collector, keys: list[str], role: str) -> Any:
    """A route dependency whose value is the key's hash (whose it is decides what a deletion may
    reach): 401 unless the bearer token is one of ``keys`` (``role``: whose keys they are, for
    the message). Each failure counts towards the address's rate limit, and an address over it
    is answered 429 before its key is looked at."""

    def check(request: Request) -> str:
        ip = client_ip(request)
        if refused := collector.blocked(ip):
            raise Refused(refused)
        token = bearer(request)
        hashed = None if token is None else hash_key(token)
        if hashed is None or hashed not in keys:
            unauthorized = error(401, "unauthorized", f"A valid {role} key is required")
            raise Refused(collector.failed_authentication(ip, unauthorized))
        return hashed

    return Depends(check)


def agent_account(config: CollectorConfig, request: Request) -> tuple[str | None, Response | None]:
    """The agent's account from its own API credential, per the auth mode."""
    if config.auth == "none":
        return None, None
    token = bearer(request)
    if token is None:
        if config.auth == "required":
            return None, error(401, "unauthorized", "Authenticate with the same credentials as the rest of the API")
        return None, None
    account = config.api_keys.get(hash_key(token))
    if account is None and config.auth == "required":
        return None, error(401, "unauthorized", "Unknown API key")
    # In optional mode an unknown key is anonymous: made-up keys must not count as customers.
    return account, None
