"""What the HTTP clients share about waiting before a retry."""

from __future__ import annotations

import math


def retry_after(value: str | None, cap: float) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds, within ``[0, cap]``; None when
    absent or not a number (an HTTP date, "nan", garbage): the caller backs off on its own."""
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return min(max(seconds, 0.0), cap) if math.isfinite(seconds) else None
