""""Possibly the same as #503": the desk's hint that a cluster not filed yet is a problem an
issue already tracks, so that a reviewer attaches it instead of filing it twice.

The measure is the known-issue one (:func:`~feedback_insights.drafts.lookalikes`: the reports a
collector would tell "known issue #503"), never a second one of the desk's. The evidence shown
is its own: how many of the cluster's reports it holds, the closest similarity, and the words
of the closest reports (scrubbed, as stored; the templates escape them).
"""

from __future__ import annotations

from typing import Any

from ..config import Config
from ..drafts import lookalikes
from ..warehouse import Warehouse
from ._pages import web_link

#: The closest reports' words, by their ``collector:id``.
_WORDS = """
SELECT collector || ':' || id AS ref, coalesce(summary, goal, detail, '') AS summary
FROM records WHERE list_contains($refs, collector || ':' || id)
"""


def possibly(warehouse: Warehouse, config: Config) -> dict[int, list[dict[str, Any]]]:
    """Per live unfiled cluster, the filed problems it resembles, as the pages show them: the
    lookalike's fields, ``issue`` ("#503", or "its issue" without a number), ``issue_link``
    (an http(s) URL, else None) and ``examples`` (``ref`` and ``summary`` of each)."""
    found = lookalikes(warehouse, config)
    refs = sorted({ref for likes in found.values() for like in likes for ref in like.examples})
    words = dict(warehouse.con.execute(_WORDS, {"refs": refs}).fetchall()) if refs else {}
    return {
        cluster: [{
            "cluster_id": like.cluster_id, "draft_id": like.draft_id, "title": like.title, "status": like.status,
            "told": like.told, "reports": like.reports, "similarity": like.similarity,
            "issue": f"#{like.issue_number}" if like.issue_number is not None else "its issue",
            "issue_link": web_link(like.issue_url),
            "examples": [{"ref": ref, "summary": words.get(ref, "")} for ref in like.examples],
        } for like in likes]
        for cluster, likes in found.items()
    }
