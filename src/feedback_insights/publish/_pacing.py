"""When the tracker's next write to GitHub may go.

GitHub's secondary rate limits ("Rate limits for the REST API"): no more than 80 content-creating
requests a minute and 500 an hour, and a second between writes for one user ("Best practices").
Over them GitHub answers 403 and, to a client that keeps writing, may ban the integration; so
writes are spaced here rather than retried there. The pacer knows this tracker's writes only:
another client writing as the same account is met by GitHub's 403, waited for like any limit.
"""

from __future__ import annotations

from collections import deque

#: How each window is named in an error line.
_SPANS = {60.0: "a minute", 3600.0: "an hour"}


class Pacer:
    """Spaces writes ``gap`` seconds apart and within every ``(count, seconds)`` window."""

    def __init__(self, gap: float, windows: tuple[tuple[int, float], ...]) -> None:
        self.gap = gap
        self.windows = windows
        self._sent: deque[float] = deque()

    def wait(self, now: float) -> tuple[float, str]:
        """Seconds from ``now`` until the next write may go (0 when at once), and the limit that
        asks for them, in words."""
        longest = max(window for _, window in self.windows)
        while self._sent and self._sent[0] <= now - longest:
            self._sent.popleft()
        waits = [(self._sent[-1] + self.gap - now, f"{self.gap:g} s between writes")] if self._sent else []
        for limit, window in self.windows:
            inside = [moment for moment in self._sent if moment > now - window]
            if len(inside) >= limit:
                span = _SPANS.get(window, f"in {window:g} s")
                waits.append((inside[-limit] + window - now, f"GitHub's secondary limit of {limit} writes {span}"))
        return max(waits, default=(0.0, ""))

    def sent(self, now: float) -> None:
        """A write went at ``now``."""
        self._sent.append(now)
