"""A maintainer quotes one owner-private report into its cluster's draft, explicitly.

Reports of a private source are never quoted by the pipeline (:mod:`._inputs`). A maintainer
on the desk may decide one report's words are needed to file the issue — having asked its
owner, say — and quote it: that is recorded in ``draft_quotes`` with who and why (and in the
draft's history), and from then on the report is rendered like any other in that cluster's
drafts, its issue body and its update comments. The decision is per report and per cluster,
never per source; erasing the report erases the quote.

The body is rendered again at once unless a maintainer edited it by hand (their text is kept:
the quote is recorded and shows in the next rendering they ask for). An LLM draft keeps its
title; its body is the template body, as after any re-rendering without the endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..clusters import demand
from ..config import DEFAULT_HALF_LIFE_DAYS, DraftsConfig
from ..core import now_utc
from ..ingest.sources import private_collectors
from ..warehouse import Warehouse, transaction
from ._inputs import draft_input
from ._render import render_body
from ._stage import record_action


class QuoteError(ValueError):
    """A quote that cannot be made as asked; the message says why."""


@dataclass(frozen=True, slots=True)
class Quoted:
    draft_id: int
    collector: str
    id: str
    #: Whether the body was rendered again with the report's words (not when edited by hand).
    rendered: bool


def quote_report(warehouse: Warehouse, settings: DraftsConfig, draft_id: int, collector: str, record_id: str,
                 actor: str, reason: str, half_life_days: float = DEFAULT_HALF_LIFE_DAYS) -> Quoted:
    """Quote the private report ``collector:record_id`` into draft ``draft_id``, by ``actor``
    for ``reason`` (both required: the record says who decided and why)."""
    actor, reason = actor.strip(), " ".join(reason.split())
    if not actor or not reason:
        raise QuoteError("quoting a private report needs who quotes it and why")
    found = warehouse.con.execute("SELECT cluster_id, status, edited FROM drafts WHERE id = ?", [draft_id]).fetchall()
    if not found:
        raise QuoteError(f"no draft {draft_id}")
    cluster_id, status, edited = found[0]
    if status != "pending":
        raise QuoteError(f"draft {draft_id} is {status}: only a pending draft takes a quote")
    member = warehouse.con.execute(
        "SELECT 1 FROM cluster_members WHERE view = 'reports' AND cluster_id = ? AND collector = ? AND id = ?",
        [cluster_id, collector, record_id]).fetchall()
    if not member:
        raise QuoteError(f"report {collector}:{record_id} is not in draft {draft_id}'s cluster {cluster_id}")
    if collector not in private_collectors(warehouse.con):
        raise QuoteError(f"report {collector}:{record_id} is not owner-private: it is quoted already")
    figures = demand(warehouse, half_life_days=half_life_days).filter(cluster_id=cluster_id)
    with transaction(warehouse.con):
        warehouse.con.execute(
            "INSERT INTO draft_quotes VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [cluster_id, collector, record_id, draft_id, actor, reason, now_utc()])
        rendered = not edited and not figures.is_empty()
        if rendered:
            inputs = draft_input(warehouse, figures.row(0, named=True))
            cited = [f"{c}:{i}" for c, i in inputs.cited(settings)]
            warehouse.con.execute("UPDATE drafts SET body = ?, cited = ?, updated_at = ? WHERE id = ?",
                                  [render_body(inputs, settings), cited, now_utc(), draft_id])
        record_action(warehouse, draft_id, "quoted", actor,
                      {"record": f"{collector}:{record_id}", "reason": reason, "rendered": rendered})
    return Quoted(draft_id, collector, record_id, rendered)
