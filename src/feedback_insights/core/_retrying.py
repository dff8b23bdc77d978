"""What the HTTP clients share about retrying: which failures are worth another try, and how
long to wait before it."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import httpx


class GaveUp(Exception):
    """Every try failed; the last one either raised ``error`` or was answered ``response``."""

    def __init__(self, tries: int, response: httpx.Response | None = None, error: Exception | None = None) -> None:
        super().__init__(f"gave up after {tries} tries")
        self.tries, self.response, self.error = tries, response, error


def retry_after(value: str | None, cap: float) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds, within ``[0, cap]``; None when
    absent or not a number (an HTTP date, "nan", garbage): the caller backs off on its own."""
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return min(max(seconds, 0.0), cap) if math.isfinite(seconds) else None


def with_retries(send: Callable[[], httpx.Response], retries: int, backoff: float, cap: float) -> httpx.Response:
    """``send()``, again after a connection failure or timeout, a 429 or a 5xx, waiting what
    Retry-After says (at most ``cap``) or ``backoff · 2ⁿ``; any other answer is returned as it
    is. Raises :class:`GaveUp` when the last of ``retries + 1`` tries fails too."""
    for attempt in range(retries + 1):
        try:
            response = send()
        except httpx.TransportError as exc:
            if attempt == retries:
                raise GaveUp(attempt + 1, error=exc) from None
            time.sleep(backoff * 2**attempt)
            continue
        if response.status_code == 429 or response.status_code >= 500:
            if attempt == retries:
                raise GaveUp(attempt + 1, response=response)
            time.sleep(retry_after(response.headers.get("retry-after"), cap) or backoff * 2**attempt)
            continue
        return response
    raise AssertionError("unreachable")
