"""The drafting stage: clusters that cross the demand threshold get one drafted issue each.

A problem cluster (reports view, status open) is drafted when it has at least
``drafts.min_accounts`` distinct accounts, or ``drafts.min_accounts_blocking`` when one of its
reports is blocking. A cluster never gets a second draft: when it grows materially (its
accounts grow by ``refresh_growth``, or its first blocking report arrives) a pending draft that
no maintainer has edited is redrafted in place; drafts already approved, rejected or edited
keep their text, and a filed issue gets a demand-update comment instead (``publish``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..clusters import demand
from ..config import Config, DraftsConfig
from ..core import now_utc
from ..warehouse import Warehouse, transaction
from ._compose import Draft, llm_draft, template_draft
from ._inputs import draft_input
from ._llm import ChatClient

PIPELINE_ACTOR = "feedback-insights"


@dataclass(slots=True)
class DraftRun:
    drafted: list[int] = field(default_factory=list)
    refreshed: list[int] = field(default_factory=list)
    llm_fallbacks: list[int] = field(default_factory=list)

    def line(self) -> str:
        fallbacks = f", {len(self.llm_fallbacks)} fell back to the template" if self.llm_fallbacks else ""
        return f"{len(self.drafted)} new drafts, {len(self.refreshed)} refreshed{fallbacks}"


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
    redraftable = drafted["status"] == "pending" and not drafted["edited"]
    return redraftable and grew_materially(figures, drafted, settings)


def draft_clusters(
    config: Config,
    warehouse: Warehouse,
    client: ChatClient | None = None,
    on_draft: Callable[[int], None] | None = None,
) -> DraftRun:
    """Draft (or redraft) every cluster that needs it; ``on_draft(cluster_id)`` reports progress."""
    settings = config.drafts
    run = DraftRun()
    figures = demand(warehouse, half_life_days=config.demand.half_life_days)
    if figures.is_empty():
        return run
    existing = {row["cluster_id"]: row for row in warehouse.con.sql("SELECT * FROM drafts").pl().iter_rows(named=True)}
    for row in figures.filter((figures["polarity"] == "problem") & (figures["status"] == "open")).iter_rows(named=True):
        drafted = existing.get(row["cluster_id"])
        if not _needs_draft(row, drafted, settings):
            continue
        inputs = draft_input(warehouse, row)
        draft = llm_draft(inputs, settings, client) if client else template_draft(inputs, settings)
        draft_id = _store(warehouse, row, draft, drafted)
        (run.refreshed if drafted else run.drafted).append(draft_id)
        if draft.llm_error:
            run.llm_fallbacks.append(draft_id)
        if on_draft:
            on_draft(row["cluster_id"])
    return run


def _store(warehouse: Warehouse, figures: dict[str, Any], draft: Draft, drafted: dict[str, Any] | None) -> int:
    con, now = warehouse.con, now_utc()
    prompt = draft.calls[-1].prompt_sha256 if draft.calls else None
    response = draft.calls[-1].response_sha256 if draft.calls else None
    values = [draft.title, draft.body, draft.labels, draft.drafted_by, draft.llm_model, prompt, response,
              draft.llm_error, figures["accounts"], figures["reports"], figures["blocking_reports"], now]
    with transaction(con):
        if drafted is None:
            (draft_id,) = con.execute(
                """INSERT INTO drafts (title, body, labels, drafted_by, llm_model, prompt_sha256, response_sha256,
                       llm_error, accounts, reports, blocking_reports, updated_at, cluster_id, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id""",
                [*values, figures["cluster_id"], now],
            ).fetchall()[0]
        else:
            draft_id = drafted["id"]
            con.execute(
                """UPDATE drafts SET title = ?, body = ?, labels = ?, drafted_by = ?, llm_model = ?,
                       prompt_sha256 = ?, response_sha256 = ?, llm_error = ?, accounts = ?, reports = ?,
                       blocking_reports = ?, updated_at = ? WHERE id = ?""",
                [*values, draft_id],
            )
        detail = {"accounts": figures["accounts"], "reports": figures["reports"], "by": draft.drafted_by}
        if draft.llm_error:
            detail["llm_error"] = draft.llm_error
        record_action(warehouse, draft_id, "refreshed" if drafted else "drafted", PIPELINE_ACTOR, detail)
        for call in draft.calls:
            con.execute(
                "INSERT INTO llm_calls VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [figures["cluster_id"], call.attempt, draft.llm_model, call.prompt_sha256, call.response_sha256,
                 call.outcome, call.error, now],
            )
    return draft_id


def record_action(warehouse: Warehouse, draft_id: int, action: str, actor: str, detail: dict[str, Any] | None = None) -> None:
    warehouse.con.execute(
        "INSERT INTO draft_actions (draft_id, action, actor, acted_at, detail) VALUES (?, ?, ?, ?, ?)",
        [draft_id, action, actor, now_utc(), orjson.dumps(detail).decode() if detail else None],
    )
