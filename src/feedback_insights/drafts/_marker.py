"""The hidden line that ties a GitHub issue to its cluster, and the one on demand-update comments.

Filing finds an issue it already filed by this marker (a lost answer is not filed twice), and a
warehouse restored from a backup adopts the issues it had filed.
"""

from __future__ import annotations

import re

MARKER = "<!-- feedback-insights:cluster={cluster_id} -->"
#: The marker as a whole line, so that text quoted in the body (always after "> ") cannot fake it.
#: GitHub stores bodies edited in its web UI with CRLF line ends.
MARKER_LINE = re.compile(r"^<!-- feedback-insights:cluster=(\d+) -->\r?$", re.MULTILINE)


def marker(cluster_id: int) -> str:
    return MARKER.format(cluster_id=cluster_id)


def cluster_of(body: str | None) -> int | None:
    """The cluster an issue body was drafted for, from its marker line."""
    found = MARKER_LINE.search(body or "")
    return int(found.group(1)) if found else None


def update_marker(cluster_id: int, accounts: int) -> str:
    """Marks a demand-update comment, so that a retried run finds it instead of posting twice."""
    return f"<!-- feedback-insights:update={cluster_id}:{accounts} -->"
