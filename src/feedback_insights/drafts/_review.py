"""Maintainer review of drafted issues: list, show, approve, reject, edit.

Every decision is recorded in ``draft_actions`` with who and when. The ``workaround`` that
collectors show agents is written here by a maintainer, never taken from a report.

Editing works on a small text form (see :func:`edit_form`): three header lines, a separator,
then the body as markdown. A maintainer's text is trusted; only the cluster marker, which
publishing needs to file exactly once, is put back if it was deleted.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ..core import now_utc
from ..warehouse import Warehouse, transaction
from ._marker import cluster_of, marker
from ._stage import record_action

SEPARATOR = "--- body (markdown) below this line ---"
_HEADERS = ("title", "labels", "workaround")


class ReviewError(ValueError):
    """A review action that cannot be done (unknown draft, wrong status, a bad edit)."""


def list_drafts(warehouse: Warehouse, status: str | None = None) -> pl.DataFrame:
    where = "WHERE d.status = $status" if status else ""
    return warehouse.con.sql(
        f"""SELECT d.id, d.cluster_id, c.service, d.status, d.known_status, d.accounts, d.reports,
                   d.drafted_by, d.edited, d.title, d.issue_url, d.updated_at
            FROM drafts d JOIN clusters c ON c.id = d.cluster_id {where}
            ORDER BY d.status = 'pending' DESC, d.accounts DESC, d.id""",
        params={"status": status} if status else None,
    ).pl()


def get_draft(warehouse: Warehouse, draft_id: int) -> dict[str, Any]:
    rows = warehouse.con.sql("SELECT * FROM drafts WHERE id = $id", params={"id": draft_id}).pl().to_dicts()
    if not rows:
        raise ReviewError(f"no draft {draft_id} (feedback-insights drafts list shows them)")
    return rows[0]


def history(warehouse: Warehouse, draft_id: int) -> list[dict[str, Any]]:
    return warehouse.con.sql(
        "SELECT action, actor, acted_at, detail FROM draft_actions WHERE draft_id = $id ORDER BY id",
        params={"id": draft_id},
    ).pl().to_dicts()


def _require(draft: dict[str, Any], allowed: tuple[str, ...], action: str) -> None:
    if draft["status"] not in allowed:
        raise ReviewError(f"draft {draft['id']} is {draft['status']}: only a {' or '.join(allowed)} draft can be {action}")


def approve(warehouse: Warehouse, draft_id: int, actor: str) -> None:
    draft = get_draft(warehouse, draft_id)
    _require(draft, ("pending", "rejected"), "approved")
    _decide(warehouse, draft_id, "approved", actor, None)


def reject(warehouse: Warehouse, draft_id: int, actor: str, reason: str) -> None:
    if not reason.strip():
        raise ReviewError("--reason: say why, so the next maintainer knows")
    draft = get_draft(warehouse, draft_id)
    _require(draft, ("pending", "approved"), "rejected")
    _decide(warehouse, draft_id, "rejected", actor, reason.strip())


def _decide(warehouse: Warehouse, draft_id: int, status: str, actor: str, reason: str | None) -> None:
    now = now_utc()
    with transaction(warehouse.con):
        warehouse.con.execute(
            """UPDATE drafts SET status = ?, reviewed_by = ?, reviewed_at = ?, reject_reason = ?, updated_at = ?
               WHERE id = ?""",
            [status, actor, now, reason, now, draft_id],
        )
        record_action(warehouse, draft_id, status, actor, {"reason": reason} if reason else None)


def edit_form(draft: dict[str, Any]) -> str:
    """The text a maintainer edits: header lines, the separator, then the body."""
    return (
        f"title: {draft['title']}\n"
        f"labels: {', '.join(draft['labels'])}\n"
        f"workaround: {draft['workaround'] or ''}\n"
        f"{SEPARATOR}\n{draft['body']}"
    )


def parse_form(text: str) -> dict[str, Any]:
    head, separator, body = text.partition(f"{SEPARATOR}\n")
    if not separator:
        raise ReviewError(f"the line {SEPARATOR!r} is missing: it separates the fields from the body")
    fields: dict[str, Any] = {}
    for number, line in enumerate(head.splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon or name.strip() not in _HEADERS:
            raise ReviewError(f"line {number}: expected one of {', '.join(h + ':' for h in _HEADERS)} (got {line[:40]!r})")
        fields[name.strip()] = value.strip()
    if not fields.get("title"):
        raise ReviewError("title: must not be empty")
    if not body.strip():
        raise ReviewError("body: must not be empty")
    fields["labels"] = [label.strip() for label in fields.get("labels", "").split(",") if label.strip()]
    fields["workaround"] = fields.get("workaround") or None
    fields["body"] = body
    return fields


def save_edit(warehouse: Warehouse, draft_id: int, actor: str, text: str) -> list[str]:
    """Store an edited form; returns the names of the fields that changed."""
    draft = get_draft(warehouse, draft_id)
    _require(draft, ("pending", "approved", "rejected", "filed"), "edited")
    fields = parse_form(text)
    if cluster_of(fields["body"]) != draft["cluster_id"]:
        fields["body"] = f"{marker(draft['cluster_id'])}\n{fields['body']}"
    changed = [name for name in ("title", "labels", "workaround", "body") if fields[name] != draft[name]]
    if not changed:
        return []
    now = now_utc()
    with transaction(warehouse.con):
        warehouse.con.execute(
            # A maintainer's edit is the answer to "still quotes an erased report" (stale).
            """UPDATE drafts SET title = ?, labels = ?, workaround = ?, body = ?, edited = true, updated_at = ?,
                   stale = false WHERE id = ?""",
            [fields["title"], fields["labels"], fields["workaround"], fields["body"], now, draft_id],
        )
        record_action(warehouse, draft_id, "edited", actor, {"fields": changed})
    return changed
