"""Maintainer review of drafted issues: list, show, approve, reject, edit.

Every decision is recorded in ``draft_actions`` with who and when. The ``workaround`` that
collectors show agents is written here by a maintainer, never taken from a report.

Editing works on a small text form (see :func:`edit_form`): three header lines, a separator,
then the body as markdown; the desk's form sends the same fields one by one
(:func:`save_fields`, which both save through, so neither can corrupt the body with a field
that holds the separator). A maintainer's text is trusted but kept within GitHub's limits and
free of control characters; the cluster marker, which publishing needs to file exactly once,
is put back if it was deleted.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import polars as pl
from pydantic import TypeAdapter, ValidationError

from ..clusters import demand
from ..config import DEFAULT_HALF_LIFE_DAYS, Label
from ..core import now_utc
from ..warehouse import Warehouse, transaction
from ._marker import cluster_of, marker
from ._render import MAX_BODY
from ._stage import PIPELINE_ACTOR, record_action

SEPARATOR = "--- body (markdown) below this line ---"
_HEADERS = ("title", "labels", "workaround")
#: The statuses a draft can be edited in (a superseded one is its survivor's business).
_EDITABLE = ("pending", "approved", "rejected", "filed")

#: Every status a draft can have: waiting for review, approved (the next publish files it),
#: rejected, filed on GitHub, superseded (its cluster was merged into another one's).
DRAFT_STATUSES = ("pending", "approved", "rejected", "filed", "superseded")
#: GitHub's longest issue title; the longest workaround collectors pass on; the most labels.
MAX_TITLE = 256
MAX_WORKAROUND = 1000
MAX_LABELS = 20

#: What ``drafts list --json`` gives of each draft, in this order (README, "Drafts, review and
#: publishing"): the draft, the cluster's current demand (as of just after the newest report:
#: ``week`` and ``as_of`` say which), the cluster, its issue, the review and the times.
#: ``drafted_*`` are the figures its text was last drafted from.
LISTED = (
    "id", "cluster_id", "status", "known_status", "service", "title", "labels", "workaround", "drafted_by",
    "llm_model", "llm_error", "edited", "stale",
    "accounts", "accounts_this_week", "accounts_last_week", "reports", "blocking_reports", "trend", "regression",
    "score", "week", "as_of",
    "drafted_accounts", "drafted_reports", "drafted_blocking_reports",
    "label", "cluster_status", "confidence", "needs_review", "config_version",
    "repo", "issue_number", "issue_url", "filed_at", "reviewed_by", "reviewed_at", "reject_reason",
    "created_at", "updated_at",
)

_DRAFTS = """
SELECT d.id, d.cluster_id, d.status, d.known_status, c.service, d.title, d.labels, d.workaround, d.drafted_by,
       d.llm_model, d.llm_error, d.edited, coalesce(d.stale, false) AS stale,
       d.accounts AS drafted_accounts, d.reports AS drafted_reports, d.blocking_reports AS drafted_blocking_reports,
       c.label, c.status AS cluster_status, c.confidence, coalesce(c.needs_review, false) AS needs_review,
       c.config_version, d.repo, d.issue_number, d.issue_url, d.filed_at, d.reviewed_by, d.reviewed_at,
       d.reject_reason, d.created_at, d.updated_at
FROM drafts d JOIN clusters c ON c.id = d.cluster_id
WHERE $status::VARCHAR IS NULL OR d.status = $status
"""
#: The current figures of a draft's cluster; the counts are zero when it has no live report left.
_COUNTS = ("accounts", "accounts_this_week", "accounts_last_week", "reports", "blocking_reports")
_FIGURES = (*_COUNTS, "trend", "regression", "score", "week", "as_of")


class ReviewError(ValueError):
    """A review action that cannot be done (unknown draft, wrong status, a bad edit).
    ``field`` names the edited field whose value was refused (None for any other refusal), so
    that the desk can say which input was wrong rather than that the action was refused."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def list_drafts(
    warehouse: Warehouse, status: str | None = None, half_life_days: float = DEFAULT_HALF_LIFE_DAYS
) -> pl.DataFrame:
    """Every draft (of one of :data:`DRAFT_STATUSES`), pending first then by the cluster's distinct
    accounts now, with the columns of :data:`LISTED`."""
    if status is not None and status not in DRAFT_STATUSES:
        raise ReviewError(f"--status must be one of: {', '.join(DRAFT_STATUSES)} (got {status!r})")
    drafts = warehouse.con.sql(_DRAFTS, params={"status": status}).pl()
    figures = demand(warehouse, half_life_days=half_life_days)
    if figures.is_empty():
        joined = drafts.with_columns(pl.lit(None).alias(name) for name in _FIGURES)
    else:
        joined = drafts.join(figures.select("cluster_id", *_FIGURES), on="cluster_id", how="left")
    return (
        joined.with_columns(pl.col(_COUNTS).fill_null(0))
        .sort([pl.col("status") != "pending", pl.col("accounts"), pl.col("id")], descending=[False, True, False])
        .select(LISTED)
    )


def cluster_drafts(warehouse: Warehouse) -> pl.DataFrame:
    """Each cluster's draft and issue, for readers of clusters (``clusters list --json``,
    ``clusters show``): ``cluster_id``, ``draft_id``, ``draft_status``, ``draft_title``,
    ``known_status``, ``repo``, ``issue_number``, ``issue_url``."""
    return warehouse.con.sql(
        """SELECT cluster_id, id AS draft_id, status AS draft_status, title AS draft_title, known_status, repo,
                  issue_number, issue_url FROM drafts ORDER BY cluster_id"""
    ).pl()


def get_draft(warehouse: Warehouse, draft_id: int) -> dict[str, Any]:
    rows = warehouse.con.sql("SELECT * FROM drafts WHERE id = $id", params={"id": draft_id}).pl().to_dicts()
    if not rows:
        raise ReviewError(f"no draft {draft_id} (feedback-insights drafts list shows them)")
    return rows[0]


def history(warehouse: Warehouse, draft_id: int) -> list[dict[str, Any]]:
    """What happened to a draft, oldest first: ``action``, ``actor``, ``acted_at``, ``detail``
    (the JSON recorded) and ``sentence``, the same told for a person (:func:`told`)."""
    rows = warehouse.con.sql(
        "SELECT action, actor, acted_at, detail FROM draft_actions WHERE draft_id = $id ORDER BY id",
        params={"id": draft_id},
    ).pl().to_dicts()
    return [row | {"sentence": told(row["action"], row["actor"], orjson.loads(row["detail"]) if row["detail"] else {})}
            for row in rows]


#: How each recorded step reads, as ``str.format`` patterns over ``who`` and the detail's keys;
#: a key a pattern needs but the detail lacks sends the step to the generic sentence.
_TOLD = {
    "drafted": "{who} drafted it from {accounts} accounts and {reports} reports, by {by}",
    "refreshed": "{who} re-drafted it from {accounts} accounts and {reports} reports, by {by}",
    "redrafted after an erasure": "{who} re-drafted it without an erased report ({accounts} accounts, {reports} reports)",
    "approved": "{who} approved it",
    "rejected": "{who} rejected it: {reason}",
    "edited": "{who} edited its {fields}",
    "superseded": "{who} superseded it: {why}; it will never be filed",
    "duplicate": "{who} marked its issue a duplicate of {of}: {why}; {github}",
    "survived a merge": "{who} kept its issue: {why}; {duplicate} will be closed as its duplicate",
    "taken over": "{who} made it cluster {cluster}'s draft: {why}",
    "back to pending": "{who} put it back to pending: {why}; {note}",
    "cluster corrected": "{who} corrected its cluster: {why}",
    "pending again": "{who} made it pending again: {why}",
    "no longer a duplicate": "{who} took back its duplicate mark: {why}",
    "filed": "{who} filed it as {url}",
    "adopted": "{who} found it already filed as {url}",
    "attached": "{who} attached it to {url}, filed by hand",
    "status": "{who} saw its issue go from {from} to {to}",
    "moved": "{who} saw its issue move from {from} to {to}",
    "demand update": "{who} commented on the issue: {from} accounts then, {to} now",
}


def told(action: str, actor: str, detail: dict[str, Any]) -> str:
    """One recorded step as a sentence ("dana rejected it: not a bug"), never as JSON."""
    who = "the pipeline" if actor == PIPELINE_ACTOR else actor
    values = {key: _plain(value) for key, value in detail.items()}
    if action in ("rejected",) and "reason" not in values and "why" in values:
        values["reason"] = values["why"]
    if values.get("by") == "template":
        values["by"] = "the template"
    if detail.get("by_draft") is not None and action == "superseded" and "why" in values:
        values["why"] += f", by draft {values['by_draft']}"
    try:
        said = _TOLD[action].format(who=who, **values)
    except (KeyError, IndexError, ValueError):
        rest = "; ".join(f"{key.replace('_', ' ')} {value}" for key, value in values.items())
        said = f"{who}: {action}" + (f" ({rest})" if rest else "")
    if detail.get("llm_error"):
        said += f"; the LLM's draft was not used: {_plain(detail['llm_error'])}"
    return said


def _plain(value: Any) -> str:
    """A detail's value in words: a list joined, nothing as "none"."""
    if isinstance(value, list):
        return ", ".join(map(_plain, value)) or "nothing"
    return "none" if value is None else str(value)


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
    """The fields of an edited form (:func:`edit_form`); :func:`save_fields` checks them."""
    # The separator is a line of its own: a field that merely contains it is no separator.
    found = re.search(rf"^{re.escape(SEPARATOR)}\n", text, re.MULTILINE)
    if found is None:
        raise ReviewError(f"the line {SEPARATOR!r} is missing: it separates the fields from the body")
    head, body = text[: found.start()], text[found.end():]
    fields: dict[str, Any] = {}
    for number, line in enumerate(head.splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon or name.strip() not in _HEADERS:
            raise ReviewError(f"line {number}: expected one of {', '.join(h + ':' for h in _HEADERS)} (got {line[:40]!r})")
        fields[name.strip()] = value.strip()
    fields["labels"] = [label.strip() for label in fields.get("labels", "").split(",") if label.strip()]
    fields["workaround"] = fields.get("workaround") or None
    fields["body"] = body
    return fields


def save_edit(warehouse: Warehouse, draft_id: int, actor: str, text: str) -> list[str]:
    """Store an edited text form (``drafts edit``); returns the names of the fields that changed."""
    _require(get_draft(warehouse, draft_id), _EDITABLE, "edited")  # said before a bad form
    return save_fields(warehouse, draft_id, actor, parse_form(text))


def save_fields(warehouse: Warehouse, draft_id: int, actor: str, fields: dict[str, Any]) -> list[str]:
    """Store an edit given field by field (``title``, ``labels``, ``workaround``, ``body``), as
    the desk's form sends them and :func:`save_edit` parses them; returns the names of the
    fields that changed. Each field is checked here, whoever edits, so that no title GitHub
    refuses and no invisible or bidirectional control character reaches an issue or the
    workaround agents are shown; a refusal is a :class:`ReviewError` naming the field."""
    draft = get_draft(warehouse, draft_id)
    _require(draft, _EDITABLE, "edited")
    body = _body(fields.get("body"))
    if cluster_of(body) != draft["cluster_id"]:
        body = f"{marker(draft['cluster_id'])}\n{body}"
    checked: dict[str, Any] = {
        "title": _line("title", fields.get("title"), MAX_TITLE, required=True),
        "labels": _labels(fields.get("labels") or []),
        "workaround": _line("workaround", fields.get("workaround"), MAX_WORKAROUND) or None,
        "body": body,
    }
    changed = [name for name in ("title", "labels", "workaround", "body") if checked[name] != draft[name]]
    if not changed:
        return []
    now = now_utc()
    with transaction(warehouse.con):
        warehouse.con.execute(
            # A maintainer's edit is the answer to "still quotes an erased report" (stale).
            """UPDATE drafts SET title = ?, labels = ?, workaround = ?, body = ?, edited = true, updated_at = ?,
                   stale = false WHERE id = ?""",
            [checked["title"], checked["labels"], checked["workaround"], checked["body"], now, draft_id],
        )
        record_action(warehouse, draft_id, "edited", actor, {"fields": changed})
    return changed


def _line(name: str, value: object, limit: int, required: bool = False) -> str:
    """One printable line of at most ``limit`` characters (surrounding spaces dropped)."""
    text = str(value or "").strip()
    if required and not text:
        raise ReviewError(f"{name}: must not be empty", name)
    if len(text) > limit:
        raise ReviewError(f"{name}: at most {limit:,} characters (got {len(text):,})", name)
    return _printable(name, text)


def _printable(name: str, text: str) -> str:
    """``text`` when every character is printable: no line break, NUL, or invisible and
    bidirectional control (U+202E would show a title reversed)."""
    bad = next((c for c in text if not c.isprintable()), None)
    if bad is not None:
        raise ReviewError(f"{name}: one line of printable characters (it has U+{ord(bad):04X})", name)
    return text


def _labels(given: list[str]) -> list[str]:
    labels = [str(label).strip() for label in given]
    if len(labels) > MAX_LABELS:
        raise ReviewError(f"labels: at most {MAX_LABELS}", "labels")
    check = TypeAdapter(Label)
    for label in labels:
        try:
            check.validate_python(label)
        except ValidationError:
            raise ReviewError(f"labels: {label[:60]!r}: a GitHub label is 1 to 50 characters", "labels") from None
        _printable("labels", label)
    return labels


def _body(value: object) -> str:
    body = str(value or "")
    if not body.strip():
        raise ReviewError("body: must not be empty", "body")
    if len(body) > MAX_BODY:
        raise ReviewError(f"body: at most {MAX_BODY:,} characters (got {len(body):,})", "body")
    return body
