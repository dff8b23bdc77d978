"""Submissions (and failed authentications) per minute, per account and per IP."""

from __future__ import annotations

import math


class RateLimiter:
    """Fixed one-minute windows per key (an account or an IP)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._windows: dict[str, list[float]] = {}

    def wait(self, key: str, now: float) -> int:
        """Seconds until ``key`` may send again; 0 when it may now."""
        if self.per_minute <= 0:
            return 0
        window = self._windows.get(key)
        if window is None or window[1] <= now:
            if len(self._windows) > 100_000:  # forget the windows that have ended, not everyone's
                self._windows = {k: w for k, w in self._windows.items() if w[1] > now}
            self._windows[key] = [1, now + 60]
            return 0
        window[0] += 1
        return math.ceil(window[1] - now) if window[0] > self.per_minute else 0

    def blocked(self, key: str, now: float) -> int:
        """Seconds until ``key`` may send again, without counting this as a request."""
        window = self._windows.get(key)
        if self.per_minute <= 0 or window is None or window[1] <= now or window[0] <= self.per_minute:
            return 0
        return math.ceil(window[1] - now)
