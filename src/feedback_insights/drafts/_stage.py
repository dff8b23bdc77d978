"""The drafting stage: clusters that cross the demand threshold get one drafted issue each.

A problem cluster or a request cluster (reports view, status open: :data:`DRAFTED`; a request's
draft is a feature request, with its own body and labels) is drafted when it has at least
``drafts.min_accounts`` distinct accounts, or ``drafts.min_accounts_blocking`` when one of its
reports is blocking. A cluster never gets a second draft: when it grows materially (its
accounts grow by ``refresh_growth``, or its first blocking report arrives) a pending draft that
no maintainer has edited is redrafted in place; drafts already approved, rejected or edited
keep their text, and a filed issue gets a demand-update comment instead (``publish``).

A cluster that needs review (``clusters.needs_review``: its confidence, from cohesion,
separation and size, is low) is not drafted automatically: it may be two problems, or none.
The run lists it (:attr:`DraftRun.held`) and a maintainer who has looked drafts it with
:func:`draft_cluster` (``drafts create CLUSTER``), whatever its confidence and demand.

A cluster holding a report its owner already filed by hand (an in-session row with status
``filed`` and an ``issue_url``) is attached to that issue instead: its draft is that issue, so
no second one is drafted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from ..clusters import demand
from ..config import Config, DraftsConfig
from ..core import now_utc
from ..warehouse import Warehouse, transaction
from ._compose import Draft, llm_draft, template_draft
from ._inputs import DraftInput, draft_input
from ._llm import ChatClient
from ._render import render_filed_by_hand

if TYPE_CHECKING:
    import polars as pl

PIPELINE_ACTOR = "feedback-insights"
#: The polarities drafted: problems, and requests (as feature requests). Praise never is.
DRAFTED = ("problem", "request")


#: A GitHub issue's address, as an in-session row filed by hand records it.
_GITHUB_ISSUE = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/issues/(\d+)/?$")

# Clusters with a report its source says was filed by hand: the first such issue, per cluster.
_FILED_BY_HAND = """
SELECT m.cluster_id, arg_min(r.issue_url, r.received_at) AS issue_url
FROM cluster_members m
JOIN records r USING (collector, id)
JOIN clusters c ON c.id = m.cluster_id
WHERE m.view = 'reports' AND r.status = 'filed' AND regexp_full_match(r.issue_url, 'https?://[^[:space:]<>"]+')
  AND list_contains($drafted, c.polarity) AND c.status <> 'merged'
GROUP BY m.cluster_id ORDER BY m.cluster_id
"""


@dataclass(slots=True)
class DraftRun:
    drafted: list[int] = field(default_factory=list)
    refreshed: list[int] = field(default_factory=list)
    llm_fallbacks: list[int] = field(default_factory=list)
    #: Clusters attached to an issue a person filed by hand (their draft is that issue).
    attached: list[int] = field(default_factory=list)
    #: Drafts that quoted an erased record and were redrafted without it.
    rerendered: list[int] = field(default_factory=list)
    #: Drafts a maintainer edited that still quote an erased record: to edit by hand.
    to_edit: list[int] = field(default_factory=list)
    #: Clusters over the threshold left undrafted because they need review (cluster ids).
    held: list[int] = field(default_factory=list)

    def line(self) -> str:
        fallbacks = f", {len(self.llm_fallbacks)} fell back to the template" if self.llm_fallbacks else ""
        attached = f", {len(self.attached)} attached to issues filed by hand" if self.attached else ""
        erased = f", {len(self.rerendered)} redrafted after an erasure" if self.rerendered else ""
        to_edit = (f", {len(self.to_edit)} edited by a maintainer still quote an erased report: "
                   f"drafts edit {', '.join(map(str, self.to_edit))}") if self.to_edit else ""
        held = (f", {len(self.held)} {'cluster needs' if len(self.held) == 1 else 'clusters need'} review before "
                f"drafting: drafts create {', '.join(map(str, self.held))}") if self.held else ""
        return f"{len(self.drafted)} new drafts, {len(self.refreshed)} refreshed{fallbacks}{attached}{erased}{to_edit}{held}"


def crosses_threshold(figures: dict[str, Any], settings: DraftsConfig) -> bool:
    needed = settings.min_accounts_blocking if figures["blocking_reports"] else settings.min_accounts
    return figures["accounts"] >= needed


def grew_materially(figures: dict[str, Any], drafted: dict[str, Any], settings: DraftsConfig) -> bool:
    more = figures["accounts"] >= drafted["accounts"] * (1 + settings.refresh_growth)
    first_blocking = figures["blocking_reports"] > 0 and drafted["blocking_reports"] == 0
    return figures["accounts"] > drafted["accounts"] and more or first_blocking


def _needs_draft(figures: dict[str, Any], drafted: dict[str, Any] | None, settings: DraftsConfig) -> bool:
    if drafted is None:
        return crosses_threshold(figures, settings)
    if drafted["stale"] and drafted["status"] != "filed" and not drafted["edited"]:
        return True  # it quotes an erased record: redrafted whatever the demand
    redraftable = drafted["status"] == "pending" and not drafted["edited"]
    return redraftable and (drafted["quotes_dismissed"] or grew_materially(figures, drafted, settings))


def draft_clusters(
    config: Config,
    warehouse: Warehouse,
    client: ChatClient | None = None,
    on_draft: Callable[[int], None] | None = None,
    as_of: datetime | None = None,
) -> DraftRun:
    """Draft (or redraft) every cluster that needs it; ``on_draft(cluster_id)`` reports progress.
    Figures are as of ``as_of`` (default: just after the newest report, as every reader)."""
    return _draft(config, warehouse, client, on_draft, erased_only=False, as_of=as_of)


def redraft_erased(config: Config, warehouse: Warehouse) -> DraftRun:
    """Only the drafts that quote an erased record, redrafted from the templates (no report goes
    to an LLM for an erasure) or retired when nothing is left to draft from; nothing new."""
    return _draft(config, warehouse, None, None, erased_only=True)


class DraftError(ValueError):
    """A cluster a maintainer asked to draft that cannot be drafted (unknown, merged, ignored,
    praise or a goal theme, without a live report, or drafted already)."""


_DRAFTABLE = "SELECT view, polarity, status, merged_into FROM clusters WHERE id = ?"


def draft_cluster(
    config: Config, warehouse: Warehouse, cluster_id: int, actor: str, client: ChatClient | None = None
) -> int:
    """A maintainer's draft of one cluster (``drafts create``), whatever its confidence and its
    demand: the way a cluster that needs review is drafted once someone has looked at it.
    Returns the new draft's id; recorded as drafted by ``actor``."""
    found = warehouse.con.execute(_DRAFTABLE, [cluster_id]).fetchall()
    if not found:
        raise DraftError(f"no cluster {cluster_id}")
    view, polarity, status, merged_into = found[0]
    if status == "merged":
        raise DraftError(f"cluster {cluster_id} was merged into {merged_into}: drafts create {merged_into}")
    if view != "reports" or polarity not in DRAFTED:
        raise DraftError(f"cluster {cluster_id} is a {'goal theme' if view != 'reports' else 'praise'} cluster: "
                         "only problems and requests are drafted")
    if status == "ignored":
        raise DraftError(f"cluster {cluster_id} is ignored: clusters unignore {cluster_id} first")
    drafted = _drafts_by_cluster(warehouse).get(cluster_id)
    if drafted is not None:
        raise DraftError(f"cluster {cluster_id} already has draft {drafted['id']} ({drafted['status']}): "
                         f"drafts show {drafted['id']}")
    figures = demand(warehouse, half_life_days=config.demand.half_life_days).filter(cluster_id=cluster_id)
    if figures.is_empty():
        raise DraftError(f"cluster {cluster_id} has no report to draft from (every one dismissed or erased)")
    row = figures.row(0, named=True)
    inputs = draft_input(warehouse, row)
    draft = llm_draft(inputs, config.drafts, client) if client else template_draft(inputs, config.drafts)
    return _store(warehouse, row, draft, None, _cited(inputs, draft, config.drafts), actor)


def _draft(
    config: Config,
    warehouse: Warehouse,
    client: ChatClient | None,
    on_draft: Callable[[int], None] | None,
    erased_only: bool,
    as_of: datetime | None = None,
) -> DraftRun:
    settings = config.drafts
    run = DraftRun()
    figures = demand(warehouse, as_of=as_of, half_life_days=config.demand.half_life_days)
    if figures.is_empty():  # no live report at all (none yet, or every one erased)
        return run
    if not erased_only:
        _attach_filed_by_hand(warehouse, figures, _drafts_by_cluster(warehouse), run)
    existing = _drafts_by_cluster(warehouse)
    run.to_edit = sorted(d["id"] for d in existing.values() if d["stale"] and d["edited"] and d["status"] != "filed")
    for row in figures.filter(figures["polarity"].is_in(DRAFTED) & (figures["status"] == "open")).iter_rows(named=True):
        drafted = existing.get(row["cluster_id"])
        erased = drafted is not None and drafted["stale"]
        if erased_only and not erased or not _needs_draft(row, drafted, settings):
            continue
        if drafted is None and row["needs_review"]:
            run.held.append(row["cluster_id"])  # a maintainer drafts it once they have looked
            continue
        inputs = draft_input(warehouse, row)
        draft = llm_draft(inputs, settings, client) if client else template_draft(inputs, settings)
        draft_id = _store(warehouse, row, draft, drafted, _cited(inputs, draft, settings))
        if erased:
            run.rerendered.append(draft_id)
        else:
            (run.refreshed if drafted else run.drafted).append(draft_id)
        if draft.llm_error:
            run.llm_fallbacks.append(draft_id)
        if on_draft:
            on_draft(row["cluster_id"])
    _retire_emptied(warehouse, run)
    return run


def _retire_emptied(warehouse: Warehouse, run: DraftRun) -> None:
    """A draft still marked stale after the run lost its cluster's every report to erasures (or
    the cluster is no longer open): nothing is left to draft from, so its text goes and it is
    rejected, saying why. A maintainer's edited text is theirs to change (``to_edit``)."""
    emptied = warehouse.con.execute(
        "SELECT id FROM drafts WHERE stale AND NOT edited AND status IN ('pending', 'approved', 'rejected') ORDER BY id"
    ).fetchall()
    for (draft_id,) in emptied:
        with transaction(warehouse.con):
            warehouse.con.execute(
                """UPDATE drafts SET status = 'rejected', body = '', stale = false, updated_at = ?,
                       reject_reason = coalesce(reject_reason, 'every report it quoted was erased') WHERE id = ?""",
                [now_utc(), draft_id])
            record_action(warehouse, draft_id, "rejected", PIPELINE_ACTOR, {"why": "every report it quoted was erased"})
        run.rerendered.append(draft_id)


def _cited(inputs: DraftInput, draft: Draft, settings: DraftsConfig) -> list[str]:
    """``collector:id`` of every record the draft draws on — what its body quotes, or for an
    LLM draft every report its prompt showed — so that an erasure of one finds the draft."""
    return [f"{collector}:{record_id}" for collector, record_id in
            inputs.cited(None if draft.drafted_by == "llm" else settings)]


def _store(
    warehouse: Warehouse, figures: dict[str, Any], draft: Draft, drafted: dict[str, Any] | None, cited: list[str],
    actor: str = PIPELINE_ACTOR,
) -> int:
    con, now = warehouse.con, now_utc()
    prompt = draft.calls[-1].prompt_sha256 if draft.calls else None
    response = draft.calls[-1].response_sha256 if draft.calls else None
    values = [draft.title, draft.body, draft.labels, draft.drafted_by, draft.llm_model, prompt, response,
              draft.llm_error, figures["accounts"], figures["reports"], figures["blocking_reports"], cited, now]
    erased = drafted is not None and drafted["stale"]
    with transaction(con):
        if drafted is None:
            (draft_id,) = con.execute(
                """INSERT INTO drafts (title, body, labels, drafted_by, llm_model, prompt_sha256, response_sha256,
                       llm_error, accounts, reports, blocking_reports, cited, updated_at, cluster_id, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id""",
                [*values, figures["cluster_id"], now],
            ).fetchall()[0]
        else:
            draft_id = drafted["id"]
            # Redrafted after an erasure, an approved draft goes back for review: the text approved
            # is not the text it now has.
            con.execute(
                """UPDATE drafts SET title = ?, body = ?, labels = ?, drafted_by = ?, llm_model = ?,
                       prompt_sha256 = ?, response_sha256 = ?, llm_error = ?, accounts = ?, reports = ?,
                       blocking_reports = ?, cited = ?, updated_at = ?, stale = false,
                       status = CASE WHEN stale AND status = 'approved' THEN 'pending' ELSE status END
                   WHERE id = ?""",
                [*values, draft_id],
            )
        detail = {"accounts": figures["accounts"], "reports": figures["reports"], "by": draft.drafted_by}
        if draft.llm_error:
            detail["llm_error"] = draft.llm_error
        action = "redrafted after an erasure" if erased else "refreshed" if drafted else "drafted"
        record_action(warehouse, draft_id, action, actor, detail)
        for call in draft.calls:
            con.execute(
                "INSERT INTO llm_calls VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [figures["cluster_id"], call.attempt, draft.llm_model, call.prompt_sha256, call.response_sha256,
                 call.outcome, call.error, now],
            )
    return draft_id


#: Every draft, and whether it quotes a report its owner has since dismissed (so a pending one is
#: redrafted without it).
_DRAFTS = """
SELECT d.*, EXISTS (
    SELECT 1 FROM records r WHERE r.status = 'dismissed' AND list_contains(d.cited, r.collector || ':' || r.id)
) AS quotes_dismissed
FROM drafts d
"""


def _drafts_by_cluster(warehouse: Warehouse) -> dict[int, dict[str, Any]]:
    return {row["cluster_id"]: row for row in warehouse.con.sql(_DRAFTS).pl().iter_rows(named=True)}


def _attach_filed_by_hand(
    warehouse: Warehouse, figures: pl.DataFrame, existing: dict[int, dict[str, Any]], run: DraftRun
) -> None:
    """A cluster holding a report its owner already filed by hand gets no draft of ours: its draft
    is that issue (status ``filed``, drafted_by ``hand``), so collectors' known_issue points at
    it and the digest lists it as filed. A draft not filed yet is attached the same way."""
    demand_of = {row["cluster_id"]: row for row in figures.iter_rows(named=True)}
    for cluster_id, url in warehouse.con.execute(_FILED_BY_HAND, {"drafted": list(DRAFTED)}).fetchall():
        drafted = existing.get(cluster_id)
        if drafted is not None and drafted["status"] in ("filed", "rejected"):
            continue
        found = _GITHUB_ISSUE.match(url)
        repo, number = (found.group(1), int(found.group(2))) if found else (None, None)
        figures_now = demand_of.get(cluster_id, {"accounts": 0, "reports": 0, "blocking_reports": 0, "label": None})
        now = now_utc()
        values = {"repo": repo, "number": number, "url": url, "now": now, "cluster": cluster_id,
                  "body": render_filed_by_hand(cluster_id, url),
                  "title": figures_now.get("label") or f"cluster {cluster_id}", "accounts": figures_now["accounts"],
                  "reports": figures_now["reports"], "blocking": figures_now["blocking_reports"]}
        with transaction(warehouse.con):
            if drafted is None:
                (draft_id,) = warehouse.con.execute(
                    """INSERT INTO drafts (cluster_id, status, title, body, labels, drafted_by, accounts, reports,
                           blocking_reports, repo, issue_number, issue_url, filed_at, known_status, created_at, updated_at)
                       VALUES ($cluster, 'filed', $title, $body, [], 'hand', $accounts, $reports, $blocking, $repo, $number,
                               $url, $now, 'acknowledged', $now, $now) RETURNING id""", values).fetchall()[0]
            else:
                draft_id = drafted["id"]
                warehouse.con.execute(
                    """UPDATE drafts SET status = 'filed', repo = $repo, issue_number = $number, issue_url = $url,
                           filed_at = $now, known_status = 'acknowledged', updated_at = $now WHERE id = $id""",
                    {**values, "id": draft_id})
            record_action(warehouse, draft_id, "attached", PIPELINE_ACTOR, {"url": url, "was": drafted and drafted["status"]})
        run.attached.append(draft_id)


def record_action(warehouse: Warehouse, draft_id: int, action: str, actor: str, detail: dict[str, Any] | None = None) -> None:
    warehouse.con.execute(
        "INSERT INTO draft_actions (draft_id, action, actor, acted_at, detail) VALUES (?, ?, ?, ?, ?)",
        [draft_id, action, actor, now_utc(), orjson.dumps(detail).decode() if detail else None],
    )
