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

import orjson

from ..clusters import demand, describe_stale
from ..config import Config, HttpCollectorConfig
from ..core import now_utc
from ..drafts import PIPELINE_ACTOR, draft_input, record_action, redraft_erased, render_body, render_emptied
from ..ingest import CollectorClient, CollectorError
from ..privacy import Pseudonymiser, is_pseudonym
from ..warehouse import Erasure, Ledger, Warehouse, erase_records, transaction
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
class ToForget:
    """What one ``forget`` erases: records as ``(collector, id)``, and quarantine entries."""

    keys: list[tuple[str, str]] = field(default_factory=list)
    quarantine: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.keys or self.quarantine)


class AmbiguousRecord(ValueError):
    """A bare record id that more than one collector holds: which one is meant must be said."""

    def __init__(self, record: str, holders: list[str]) -> None:
        super().__init__(f"record {record} is held by collectors {', '.join(holders)}: name one with --collector")
        self.record, self.holders = record, holders


@dataclass(slots=True)
class ForgetRun:
    erasure: Erasure
    described: list[int] = field(default_factory=list)
    redrafted: list[int] = field(default_factory=list)
    to_edit: list[int] = field(default_factory=list)
    bodies: BodySync = field(default_factory=BodySync)
    #: Records erased from the collectors that sent them, and what a collector refused.
    at_collectors: int = 0
    collector_errors: list[str] = field(default_factory=list)

    def line(self) -> str:
        e = self.erasure
        text = (f"forgot {e.records} records ({e.quarantined} quarantine entries), described {len(self.described)} "
                f"clusters again, redrafted {len(self.redrafted)} drafts, rewrote {len(self.bodies.rewritten)} "
                f"issue bodies")
        if self.at_collectors:
            text += f", erased {self.at_collectors} from their collectors"
        if self.to_edit:
            text += f"; drafts edited by a maintainer still quote it: {', '.join(map(str, self.to_edit))}"
        return text


# An account's records: its own, and those that carry it elsewhere (a reporter in metadata, a
# field of the kept original the dialect did not map).
_ACCOUNT_RECORDS = """
SELECT r.collector, r.id FROM records r
WHERE r.account = $pseudonym OR EXISTS (
    SELECT 1 FROM (SELECT unnest($needles) AS needle)
    WHERE contains(concat_ws(chr(0), CAST(r.metadata AS VARCHAR), CAST(r.original AS VARCHAR),
                             CAST(r.context AS VARCHAR), CAST(r.agent AS VARCHAR)), needle))
ORDER BY 1, 2
"""

_ACCOUNT_QUARANTINE = """
SELECT q.id FROM quarantine q
WHERE contains(q.raw, $pseudonym) OR EXISTS (SELECT 1 FROM (SELECT unnest($needles) AS needle) WHERE contains(q.raw, needle))
ORDER BY 1
"""


def records_to_forget(config: Config, warehouse: Warehouse, record: str | None = None,
                      account: str | None = None, collector: str | None = None) -> ToForget:
    """What to erase for a ``record`` (its id exactly as stored or as its source sent it,
    with its ``collector`` unless only one collector holds that id), or for an ``account`` (as
    a source sends it, pseudonymised here with the configured key, or the ``acct_…`` pseudonym
    itself): its records, the records that carry it elsewhere (a ``metadata.reporter``, a field
    of the kept original), and its quarantined reports."""
    pseudonymise = Pseudonymiser(config.privacy.key())
    if account is not None:
        return _account(warehouse, account, pseudonymise)
    assert record is not None
    # An id that carried personal data or a secret is stored as its keyed hash.
    ids = sorted({record, pseudonymise.identifier(record)})
    rows = warehouse.con.execute(
        "SELECT collector, id FROM records WHERE id IN (SELECT unnest($ids)) AND ($c IS NULL OR collector = $c) "
        "ORDER BY 1, 2", {"ids": ids, "c": collector}).fetchall()
    holders = sorted({c for c, _ in rows})
    if len(holders) > 1:
        raise AmbiguousRecord(record, holders)
    return ToForget([(c, i) for c, i in rows])


def _account(warehouse: Warehouse, account: str, pseudonymise: Pseudonymiser) -> ToForget:
    pseudonym = account if is_pseudonym(account) else pseudonymise(account)
    # As JSON strings, so that account "bob" does not take the records that mention "bobcat".
    needles = sorted({orjson.dumps(pseudonym).decode(), orjson.dumps(account).decode()})
    rows = warehouse.con.execute(_ACCOUNT_RECORDS, {"pseudonym": pseudonym, "needles": needles}).fetchall()
    entries = warehouse.con.execute(_ACCOUNT_QUARANTINE, {"pseudonym": pseudonym, "needles": needles}).fetchall()
    return ToForget([(c, i) for c, i in rows], [e for (e,) in entries])


def forget(config: Config, warehouse: Warehouse, target: ToForget, actor: str, reason: str | None,
           tracker: IssueTracker | None = None) -> ForgetRun:
    """Erase ``target`` everywhere now: every table, the ledger (so no source stores it again),
    the collectors that sent it, and the warehouse file's bytes; with a ``tracker``, filed
    issues too (else the next publish run does it)."""
    run = ForgetRun(erase_records(warehouse.con, target.keys, actor, reason, Ledger(config.privacy.key()),
                                  target.quarantine))
    run.described = describe_stale(warehouse)
    drafted = redraft_erased(config, warehouse)
    run.redrafted, run.to_edit = drafted.rerendered, drafted.to_edit
    if tracker is not None:
        run.bodies = resync_erased(config, warehouse, tracker)
    run.at_collectors, run.collector_errors = erase_at_collectors(config, target.keys)
    warehouse.rewrite()  # last: every write above leaves freed blocks too
    return run


def erase_at_collectors(config: Config, keys: list[tuple[str, str]]) -> tuple[int, list[str]]:
    """Delete ``keys`` from the collectors (HTTP sources) that sent them, with the pipeline
    key: the collector's own store holds the report too. Returns how many were deleted there
    and one line per collector that could not be reached or refused."""
    by_source = {s.name: s for s in config.sources if isinstance(s, HttpCollectorConfig)}
    deleted, errors = 0, []
    for name, source in by_source.items():
        ids = [i for c, i in keys if c == name]
        if not ids:
            continue
        try:
            with CollectorClient(source.url, source.key(), retries=source.retries) as client:
                deleted += sum(client.delete_record(record_id) for record_id in ids)
        except CollectorError as exc:
            errors.append(f"{name}: the erased reports are still at the collector: {exc}")
    return deleted, errors


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
            body, quoted = _without_erased(config, warehouse, draft, figures.get(draft["cluster_id"]))
            cited: list[str] | None = quoted
            if _sha256(current) != (draft["filed_body_sha256"] or _sha256(draft["body"])):
                # A maintainer edited it since: their text stays, only the erased quote goes.
                edited = _drop_quotes(current, draft["body"], body)
                if edited is None:
                    _settle(warehouse, draft, "to check", None)
                    result.to_check.append(f"{where} was edited on GitHub since it was filed and no longer quotes "
                                           "the erased report verbatim: check it by hand")
                    continue
                body, cited = edited, None  # its quotes are the filed body's, less the erased ones
            tracker.replace_body(draft["repo"], draft["issue_number"], body)
        except GitHubError as exc:
            result.errors.append(f"draft {draft['id']}: the erased report is still in {where}: {exc}")
            continue
        _settle(warehouse, draft, "body rewritten after an erasure", body, cited)
        result.rewritten.append(where)
    _resync_update_comments(warehouse, tracker, result)
    return result


_GONE_QUOTES = """
SELECT u.draft_id, u.comment_id, u.body_sha256, d.repo, d.issue_number, d.issue_url
FROM update_comments u JOIN drafts d ON d.id = u.draft_id
WHERE d.repo IS NOT NULL AND d.issue_number IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM records r WHERE r.collector = u.quoted_collector AND r.id = u.quoted_id)
ORDER BY u.draft_id, u.comment_id
"""


def _resync_update_comments(warehouse: Warehouse, tracker: IssueTracker, result: BodySync) -> None:
    """Demand-update comments that quote a report no longer in the warehouse: one still as we
    posted it keeps its first paragraph (the figures, true still) and the quote gives way to
    :data:`ERASED_QUOTE`; one edited on GitHub since is listed for a person, like a body."""
    rows = warehouse.con.sql(_GONE_QUOTES).pl()
    for (repo, number), comments in rows.group_by("repo", "issue_number", maintain_order=True):
        try:
            current = {c.id: c for c in tracker.comments(str(repo), int(number))}
        except GitHubError as exc:
            result.errors.append(f"{comments['issue_url'][0]}: its demand updates may still quote an erased report: {exc}")
            continue
        for row in comments.iter_rows(named=True):
            comment = current.get(row["comment_id"])
            action = "demand update deleted on GitHub before an erasure"
            try:
                if comment is not None and _sha256(comment.body) != row["body_sha256"]:
                    action = "demand update to check"
                    result.to_check.append(f"{comment.url} was edited on GitHub since it was posted and quotes an "
                                           "erased report: check it by hand")
                elif comment is not None:
                    tracker.edit_comment(row["repo"], comment.id, _without_quote(comment.body))
                    action = "demand update rewritten after an erasure"
                    result.rewritten.append(comment.url)
            except GitHubError as exc:
                result.errors.append(f"{comment.url if comment else row['issue_url']}: the erased report is still quoted: {exc}")
                continue
            with transaction(warehouse.con):
                warehouse.con.execute("DELETE FROM update_comments WHERE draft_id = ? AND comment_id = ?",
                                      [row["draft_id"], row["comment_id"]])
                record_action(warehouse, row["draft_id"], action, PIPELINE_ACTOR, {"comment": row["comment_id"]})


def _without_quote(comment: str) -> str:
    """A demand update without the report it quoted: its first paragraph is the marker and the
    figures (``drafts/templates/issue_update.md.j2``); the quote after it gives way to the line."""
    figures = comment.split("\n\n", 1)[0]
    return f"{figures}\n\n{ERASED_QUOTE}\n"


def _without_erased(config: Config, warehouse: Warehouse, draft: dict[str, Any],
                    figures: dict[str, Any] | None) -> tuple[str, list[str]]:
    """The body without the erased records, and ``collector:id`` of the records it now quotes
    (a report quoted only now must find this issue when it is erased in turn)."""
    if figures is None:  # every report of the cluster was erased
        return render_emptied(draft["cluster_id"]), []
    inputs = draft_input(warehouse, figures)
    return render_body(inputs, config.drafts), [f"{c}:{i}" for c, i in inputs.cited(config.drafts)]


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


def _settle(warehouse: Warehouse, draft: dict[str, Any], action: str, body: str | None,
            cited: list[str] | None = None) -> None:
    with transaction(warehouse.con):
        if body is None:
            warehouse.con.execute("UPDATE drafts SET stale = false, updated_at = ? WHERE id = ?", [now_utc(), draft["id"]])
        else:
            warehouse.con.execute(
                "UPDATE drafts SET body = ?, filed_body_sha256 = ?, cited = coalesce(?, cited), stale = false, "
                "updated_at = ? WHERE id = ?", [body, _sha256(body), cited, now_utc(), draft["id"]])
        record_action(warehouse, draft["id"], action, PIPELINE_ACTOR)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()
