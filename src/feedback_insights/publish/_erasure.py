"""Erasure that reaches everything: ``forget`` a record or an account, and the filed issues that
quoted what was forgotten.

The warehouse erases the records and marks what quoted them (:func:`~feedback_insights.warehouse.erase_records`);
this finishes the job where the other stages cannot: clusters are described again, drafts not
filed yet are redrafted without the record, and a filed issue whose body GitHub still holds as we
filed it is re-rendered without it. From an issue a maintainer edited since, only the erased
quote's lines are dropped, where they are still there verbatim; otherwise it is listed for a
person to check. Erasures found by ingest (rows deleted at their source) are finished
by the next clustering, drafting and publishing runs the same way.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ..clusters import demand, describe_stale
from ..config import Config
from ..core import now_utc
from ..drafts import PIPELINE_ACTOR, draft_input, record_action, redraft_erased, render_body, render_emptied
from ..privacy import Pseudonymiser, is_pseudonym
from ..warehouse import Erasure, Warehouse, erase_records, transaction
from ._github import GitHubError, IssueTracker

#: What stands where a maintainer-edited issue quoted an erased report.
ERASED_QUOTE = "> *(a report quoted here was erased at its owner's request)*"

_STALE_FILED = """
SELECT id, cluster_id, repo, issue_number, issue_url, drafted_by, filed_body_sha256, body
FROM drafts WHERE stale AND status = 'filed' ORDER BY id
"""


@dataclass(slots=True)
class BodySync:
    """What publishing did about filed issues that quoted an erased record."""

    rewritten: list[str] = field(default_factory=list)
    to_check: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ForgetRun:
    erasure: Erasure
    described: list[int] = field(default_factory=list)
    redrafted: list[int] = field(default_factory=list)
    to_edit: list[int] = field(default_factory=list)
    bodies: BodySync = field(default_factory=BodySync)

    def line(self) -> str:
        e = self.erasure
        text = (f"forgot {e.records} records ({e.quarantined} quarantine entries), described {len(self.described)} "
                f"clusters again, redrafted {len(self.redrafted)} drafts, rewrote {len(self.bodies.rewritten)} "
                f"issue bodies")
        if self.to_edit:
            text += f"; drafts edited by a maintainer still quote it: {', '.join(map(str, self.to_edit))}"
        return text


def records_to_forget(config: Config, warehouse: Warehouse, record: str | None = None,
                      account: str | None = None) -> list[tuple[str, str]]:
    """The ``(collector, id)`` keys of a record (``id`` or ``collector:id``) or of every record
    of an account (as a source sends it, pseudonymised here with the configured key, or the
    ``acct_…`` pseudonym itself)."""
    if account is not None:
        pseudonym = account if is_pseudonym(account) else Pseudonymiser(config.privacy.key())(account)
        rows = warehouse.con.execute("SELECT collector, id FROM records WHERE account = ? ORDER BY 1, 2",
                                     [pseudonym]).fetchall()
        return [(c, i) for c, i in rows]
    assert record is not None
    collector, _, record_id = record.rpartition(":")
    rows = warehouse.con.execute(
        "SELECT collector, id FROM records WHERE id = ? AND (? IS NULL OR collector = ?) ORDER BY 1",
        [record_id, collector or None, collector or None]).fetchall()
    if not rows and collector:
        rows = warehouse.con.execute("SELECT collector, id FROM records WHERE id = ?", [record]).fetchall()
    return [(c, i) for c, i in rows]


def forget(config: Config, warehouse: Warehouse, keys: list[tuple[str, str]], actor: str, reason: str | None,
           tracker: IssueTracker | None = None) -> ForgetRun:
    """Erase ``keys`` everywhere now; with a ``tracker``, filed issues too (else the next
    publish run does it)."""
    run = ForgetRun(erase_records(warehouse.con, keys, actor, reason))
    run.described = describe_stale(warehouse)
    drafted = redraft_erased(config, warehouse)
    run.redrafted, run.to_edit = drafted.rerendered, drafted.to_edit
    if tracker is not None:
        run.bodies = resync_erased(config, warehouse, tracker)
    return run


def resync_erased(config: Config, warehouse: Warehouse, tracker: IssueTracker) -> BodySync:
    """Filed issues that quoted an erased record: replace the body GitHub still holds as we
    filed it with one rendered without the record; list the ones edited since for a person."""
    result = BodySync()
    figures = {row["cluster_id"]: row for row in demand(warehouse, half_life_days=config.demand.half_life_days)
               .iter_rows(named=True)}
    for draft in warehouse.con.sql(_STALE_FILED).pl().to_dicts():
        where = draft["issue_url"] or f"draft {draft['id']}"
        if draft["drafted_by"] == "hand" or draft["repo"] is None:
            _settle(warehouse, draft, "to check", None)
            result.to_check.append(f"{where} (filed by hand) quotes an erased report: check it by hand")
            continue
        try:
            current = tracker.body(draft["repo"], draft["issue_number"])
            body = _without_erased(config, warehouse, draft, figures.get(draft["cluster_id"]))
            if _sha256(current) != (draft["filed_body_sha256"] or _sha256(draft["body"])):
                # A maintainer edited it since: their text stays, only the erased quote goes.
                edited = _drop_quotes(current, draft["body"], body)
                if edited is None:
                    _settle(warehouse, draft, "to check", None)
                    result.to_check.append(f"{where} was edited on GitHub since it was filed and no longer quotes "
                                           "the erased report verbatim: check it by hand")
                    continue
                body = edited
            tracker.replace_body(draft["repo"], draft["issue_number"], body)
        except GitHubError as exc:
            result.errors.append(f"draft {draft['id']}: the erased report is still in {where}: {exc}")
            continue
        _settle(warehouse, draft, "body rewritten after an erasure", body)
        result.rewritten.append(where)
    return result


def _without_erased(config: Config, warehouse: Warehouse, draft: dict[str, Any], figures: dict[str, Any] | None) -> str:
    if figures is None:  # every report of the cluster was erased
        return render_emptied(draft["cluster_id"])
    return render_body(draft_input(warehouse, figures), config.drafts)


def _drop_quotes(current: str, filed: str, rerendered: str) -> str | None:
    """``current`` (an issue body a maintainer edited) without the quote lines of the body as
    filed that the body rendered without the erased records no longer has; each run of them
    becomes one line saying why. None when one of those lines is no longer there verbatim
    (edited or moved: a person must look)."""
    kept = set(rerendered.splitlines())
    gone = [line for line in filed.splitlines() if line.startswith(">") and line.strip("> ") and line not in kept]
    lines = current.splitlines()
    if not gone or any(line not in lines for line in gone):
        return None
    out: list[str] = []
    for line in lines:
        if line in gone:
            if not out or out[-1] != ERASED_QUOTE:
                out.append(ERASED_QUOTE)
        else:
            out.append(line)
    return "\n".join(out)


def _settle(warehouse: Warehouse, draft: dict[str, Any], action: str, body: str | None) -> None:
    with transaction(warehouse.con):
        if body is None:
            warehouse.con.execute("UPDATE drafts SET stale = false, updated_at = ? WHERE id = ?", [now_utc(), draft["id"]])
        else:
            warehouse.con.execute(
                "UPDATE drafts SET body = ?, filed_body_sha256 = ?, stale = false, updated_at = ? WHERE id = ?",
                [body, _sha256(body), now_utc(), draft["id"]])
        record_action(warehouse, draft["id"], action, PIPELINE_ACTOR)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()
