"""Filed issues whose clusters a maintainer merged: the absorbed cluster's issue is closed on
GitHub as a duplicate of the survivor's.

``clusters merge`` only records it (``drafts.superseded_by``, the survivor's draft); this step,
run by every ``publish``, does what GitHub needs: a comment "Duplicate of #N" (GitHub's own way
of marking a duplicate, since its REST API takes the closing reason but not the issue it
duplicates), then closing with the state reason ``duplicate``. The comment carries a hidden
marker, so a run that lost GitHub's answer finds it rather than posting it twice; the close is
a PATCH, safe to repeat. ``duplicate_marked_at`` is set only when both are done: a failure is
one error line and the next run tries again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import now_utc
from ..drafts import PIPELINE_ACTOR, record_action
from ..warehouse import Warehouse, transaction
from ._github import GitHubError, IssueTracker

_PENDING = """
SELECT id, cluster_id, repo, issue_number, issue_url, superseded_by, drafted_by
FROM drafts
WHERE status = 'filed' AND superseded_by IS NOT NULL AND duplicate_marked_at IS NULL
ORDER BY id
"""

#: Where a superseded issue's survivor is now: the chain of merges followed to its end.
_SURVIVOR = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT $start, 0
    UNION ALL
    SELECT d.superseded_by, chain.depth + 1 FROM chain JOIN drafts d ON d.id = chain.id
    WHERE d.superseded_by IS NOT NULL AND chain.depth < 100
)
SELECT d.id, d.repo, d.issue_number, d.issue_url, d.status
FROM chain JOIN drafts d ON d.id = chain.id
ORDER BY chain.depth DESC LIMIT 1
"""


@dataclass(slots=True)
class DuplicateRun:
    #: ``(draft, its issue's url, the surviving issue's url)``.
    marked: list[tuple[int, str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def duplicate_comment(survivor_repo: str, survivor_number: int, repo: str) -> str:
    """The comment GitHub reads as "marked as a duplicate": ``Duplicate of #N`` on its own line
    (``owner/name#N`` across repositories), then why, for the people following the issue."""
    reference = f"#{survivor_number}" if survivor_repo.lower() == repo.lower() else f"{survivor_repo}#{survivor_number}"
    return (f"Duplicate of {reference}\n\nA maintainer found that the reports behind this issue describe the same "
            f"problem as {reference}: they are counted there from now on, and this issue is closed.")


def duplicate_marker(draft_id: int) -> str:
    return f"<!-- feedback-insights:duplicate={draft_id} -->"


def mark_duplicates(warehouse: Warehouse, tracker: IssueTracker, ours: Callable[[dict[str, Any]], bool]) -> DuplicateRun:
    """Close every issue recorded as a duplicate and not marked yet. ``ours(draft)`` says whether
    its issue is in a repository this configuration publishes to: one a person filed by hand
    elsewhere is not ours to close, and is only recorded as left alone."""
    run = DuplicateRun()
    for draft in warehouse.con.sql(_PENDING).pl().iter_rows(named=True):
        survivor = warehouse.con.sql(_SURVIVOR, params={"start": draft["superseded_by"]}).pl().row(0, named=True)
        if survivor["status"] != "filed" or survivor["issue_number"] is None:
            run.errors.append(f"draft {draft['id']}: its survivor, draft {survivor['id']}, is {survivor['status']}, "
                              "not filed: not closed as a duplicate")
            continue
        if not ours(draft):
            _done(warehouse, draft, "duplicate left alone", {"why": f"{draft['issue_url']} is not in a repository we publish to",
                                                            "of": survivor["issue_url"]})
            continue
        try:
            _mark(tracker, draft, survivor)
        except GitHubError as exc:
            run.errors.append(f"draft {draft['id']}: not yet closed as a duplicate of {survivor['issue_url']}: {exc}")
            continue
        _done(warehouse, draft, "marked duplicate", {"of": survivor["issue_url"]})
        run.marked.append((draft["id"], draft["issue_url"], survivor["issue_url"]))
    return run


def _mark(tracker: IssueTracker, draft: dict[str, Any], survivor: dict[str, Any]) -> None:
    # GitHub reads "Duplicate of" only at the start of the comment: the marker goes last.
    body = f"{duplicate_comment(survivor['repo'], survivor['issue_number'], draft['repo'])}\n\n{duplicate_marker(draft['id'])}"
    tracker.comment_once(draft["repo"], draft["issue_number"], duplicate_marker(draft["id"]), body)
    tracker.close_as_duplicate(draft["repo"], draft["issue_number"])


def _done(warehouse: Warehouse, draft: dict[str, Any], action: str, detail: dict[str, Any]) -> None:
    now = now_utc()
    with transaction(warehouse.con):
        warehouse.con.execute("UPDATE drafts SET duplicate_marked_at = ?, updated_at = ? WHERE id = ?", [now, now, draft["id"]])
        record_action(warehouse, draft["id"], action, PIPELINE_ACTOR, detail)
