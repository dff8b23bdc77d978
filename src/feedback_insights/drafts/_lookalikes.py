"""Clusters not filed yet that look like a problem already filed: "possibly the same as #503".

The measure is the collector's (:mod:`._meaning`): for every report of a live cluster that no
issue tracks yet, the filed problem of its service a collector would tell it it is (the
nearest published representative reaching ``[embedding] known_issue_similarity``). A cluster
whose reports would be told "known issue #503" is probably #503 again, split off or worded
apart; the share of its reports told so, and the closest of them, are the evidence a reviewer
weighs before drafting a second issue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..clusters import members_model
from ..config import Config
from ..warehouse import Warehouse
from ._meaning import Meaning, member_vectors, recognised

#: How many of the closest reports are named as evidence.
EXAMPLES = 3

#: Issues agents are told about: filed (or attached to an issue filed by hand), not superseded.
_FILED = """
SELECT d.cluster_id, d.id AS draft_id, d.issue_number, d.issue_url, d.title,
       coalesce(d.known_status, 'acknowledged') AS status, c.service
FROM drafts d JOIN clusters c ON c.id = d.cluster_id
WHERE d.status = 'filed' AND d.superseded_by IS NULL AND c.view = 'reports'
ORDER BY d.cluster_id
"""

#: Live clusters no issue tracks yet, of what is drafted (problems and requests; praise is not).
_UNFILED = """
SELECT c.id, c.service FROM clusters c
WHERE c.view = 'reports' AND c.polarity <> 'praise' AND c.status = 'open'
  AND NOT EXISTS (SELECT 1 FROM drafts d WHERE d.cluster_id = c.id AND d.status = 'filed')
ORDER BY c.id
"""


@dataclass(frozen=True, slots=True)
class Lookalike:
    """A filed problem an unfiled cluster resembles: which issue, and the evidence."""

    cluster_id: int  # the filed cluster
    draft_id: int
    issue_number: int | None
    issue_url: str | None
    title: str
    status: str  # its known_issue status (acknowledged, planned, in_progress, fixed, wont_fix)
    told: int  # reports of the unfiled cluster a collector would tell it is this issue
    reports: int  # reports of the unfiled cluster with a vector
    similarity: float  # the closest of them: its cosine to the issue's nearest representative
    examples: tuple[str, ...]  # the closest of them, ``collector:id``, closest first

    @property
    def share(self) -> float:
        return self.told / self.reports


def lookalikes(warehouse: Warehouse, config: Config) -> dict[int, list[Lookalike]]:
    """For every live unfiled cluster (a problem or a request) with a report a collector would
    tell is a filed problem of its service: those problems, the most of its reports first."""
    filed = warehouse.con.sql(_FILED).pl()
    unfiled = warehouse.con.sql(_UNFILED).pl()
    if filed.is_empty() or unfiled.is_empty():
        return {}
    model = members_model(warehouse.con, "reports")
    vectors = member_vectors(warehouse, model, [*filed["cluster_id"], *unfiled["id"]])
    threshold = config.embedding.known_issue_similarity
    issues = [row for row in filed.iter_rows(named=True) if row["cluster_id"] in vectors]
    meanings = {issue["cluster_id"]: Meaning.of_members(model, vectors[issue["cluster_id"]][1], threshold)
                for issue in issues}
    out: dict[int, list[Lookalike]] = {}
    for cluster, service in unfiled.iter_rows():
        if cluster not in vectors:
            continue
        candidates = [issue for issue in issues if issue["service"] == service]
        records, members = vectors[cluster]
        chosen, scores = recognised(members, [meanings[issue["cluster_id"]] for issue in candidates])
        found = [_lookalike(candidates[i], records, chosen == i, scores) for i in np.unique(chosen[chosen >= 0])]
        if found:
            out[cluster] = sorted(found, key=lambda like: (-like.told, -like.similarity, like.cluster_id))
    return out


def _lookalike(issue: dict, records: list[str], told: np.ndarray, scores: np.ndarray) -> Lookalike:
    closest = [int(i) for i in np.flatnonzero(told)[np.argsort(-scores[told], kind="stable")]]
    return Lookalike(cluster_id=issue["cluster_id"], draft_id=issue["draft_id"], issue_number=issue["issue_number"],
                     issue_url=issue["issue_url"], title=issue["title"], status=issue["status"], told=len(closest),
                     reports=len(records), similarity=float(scores[closest[0]]),
                     examples=tuple(records[i] for i in closest[:EXAMPLES]))
