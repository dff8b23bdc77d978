"""The publishing stage: approved drafts → GitHub issues; issue state → known_issue status →
the sinks (collectors; filed reports → their in-session rows).

Each step is safe to repeat: filing is exactly once (:class:`IssueTracker`), a known_issue is
re-sent only when it changed, and write-back only touches rows not yet filed.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from ..clusters import demand
from ..config import Config, HttpCollectorConfig
from ..core import SINKS, now_utc
from ..drafts import PIPELINE_ACTOR, draft_input, grew_materially, record_action, render_update, update_marker
from ..ingest import CollectorClient
from ..warehouse import Warehouse, transaction
from ._duplicates import mark_duplicates
from ._erasure import resync_erased
from ._github import GitHubError, IssueState, IssueTracker
from ._sinks import SinkResult

#: What a known_issue status means for the cluster (regressions are judged against fixed_at).
_CLUSTER_STATUS = {"fixed": "fixed", "wont_fix": "wont_fix"}

_DRAFTS = """
SELECT d.id, d.cluster_id, d.title, d.body, d.labels, d.repo, d.issue_number, d.issue_url, d.known_status, c.service,
       d.drafted_by,
       d.accounts, d.reports, d.blocking_reports,
       c.status AS cluster_status, c.merged_into
FROM drafts d JOIN clusters c ON c.id = d.cluster_id
WHERE d.status = $status ORDER BY d.id
"""


@dataclass(slots=True)
class PublishRun:
    filed: list[tuple[int, str]] = field(default_factory=list)
    #: Issues that already existed for the cluster (an interrupted earlier run filed them).
    adopted: list[tuple[int, str]] = field(default_factory=list)
    status_changes: list[tuple[int, str, str]] = field(default_factory=list)
    #: ``(draft, issue url, surviving issue url)``: issues closed as duplicates after a merge.
    duplicates: list[tuple[int, str, str]] = field(default_factory=list)
    #: Filed issues whose cluster grew materially: a demand-update comment was posted.
    updates: list[tuple[int, int]] = field(default_factory=list)
    #: A dry run: ``would_file`` holds what would be filed, and nothing was changed.
    dry_run: bool = False
    would_file: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: What each sink did, by its registered name.
    sinks: dict[str, SinkResult] = field(default_factory=dict)
    #: Filed issues whose body was re-rendered without an erased report.
    bodies_rewritten: list[str] = field(default_factory=list)
    #: Filed issues quoting an erased report that a person must change (edited since filing).
    to_check: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def deliveries(self) -> SinkResult:
        """known_issue entries sent to collectors."""
        return self.sinks.get("known_issues", SinkResult())

    @property
    def written_back(self) -> int:
        """In-session rows marked filed."""
        return self.sinks.get("write_back", SinkResult()).sent

    def line(self) -> str:
        if self.dry_run:
            repos, count = sorted({item["repo"] for item in self.would_file}), len(self.would_file)
            return (f"dry run: would file {count} issue{'' if count == 1 else 's'}"
                    + (f" (on {', '.join(repos)})" if repos else "")
                    + (f", {len(self.skipped)} skipped" if self.skipped else "")
                    + (f", {len(self.errors)} with no repository" if self.errors else ""))
        others = "".join(f", {name}: {r.sent} sent" for name, r in self.sinks.items() if name not in ("known_issues", "write_back"))
        return (
            f"{len(self.filed)} filed, {len(self.adopted)} found already filed, "
            f"{len(self.status_changes)} status changes, {len(self.updates)} demand updates, "
            f"{self.deliveries.sent} known_issue updates sent "
            f"({self.deliveries.unchanged} unchanged"
            + (f", {self.deliveries.withdrawn} withdrawn" if self.deliveries.withdrawn else "")
            + f"), {self.written_back} rows written back{others}"
            + (f", {len(self.duplicates)} closed as duplicates" if self.duplicates else "")
            + (f", {len(self.bodies_rewritten)} issue bodies rewritten after an erasure" if self.bodies_rewritten else "")
        )


def publish(
    config: Config,
    warehouse: Warehouse,
    tracker: IssueTracker | None,
    collectors: dict[str, CollectorClient],
    dry_run: bool = False,
) -> PublishRun:
    """File, sync, then tell every sink. ``collectors`` are the clients of the HTTP sources
    that take known issues, by name. ``dry_run`` lists what would be filed and changes nothing
    (no tracker needed)."""
    run = PublishRun(dry_run=dry_run)
    approved = warehouse.con.sql(_DRAFTS, params={"status": "approved"}).pl().to_dicts()
    # One decision for the run and its dry run: the same drafts, to the same repositories.
    targets = [(draft, repo) for draft in approved if (repo := _target(config, draft, run))]
    if dry_run:
        run.would_file = [
            {"draft": d["id"], "repo": repo, "title": d["title"],
             "labels": list(dict.fromkeys([*d["labels"], config.github.marker_label])), "body": d["body"]}
            for d, repo in targets
        ]
        return run
    if tracker is None:
        raise ValueError("publishing needs an IssueTracker unless dry_run")
    for draft, repo in targets:
        _file(config, warehouse, tracker, draft, repo, run)
    run.skipped.extend(tracker.notes)  # labels left off, and why
    duplicates = mark_duplicates(warehouse, tracker, lambda draft: _ours(config, draft))
    run.duplicates = duplicates.marked
    run.errors.extend(duplicates.errors)
    figures = {row["cluster_id"]: row for row in demand(warehouse, half_life_days=config.demand.half_life_days).iter_rows(named=True)}
    for draft in warehouse.con.sql(_DRAFTS, params={"status": "filed"}).pl().to_dicts():
        if not _ours(config, draft):
            continue  # filed by hand somewhere we do not publish: its state is not ours to read
        _sync(config, warehouse, tracker, draft, run)
        if draft["cluster_id"] in figures and grew_materially(figures[draft["cluster_id"]], draft, config.drafts):
            _update_demand(config, warehouse, tracker, draft, figures[draft["cluster_id"]], run)
    erased = resync_erased(config, warehouse, tracker)
    run.bodies_rewritten, run.to_check = erased.rewritten, erased.to_check
    run.errors.extend(erased.errors)
    for name, sink in SINKS.items().items():
        run.sinks[name] = result = sink(config, warehouse, collectors)
        run.errors.extend(result.errors)
    return run


def publish_configured(config: Config, dry_run: bool = False) -> PublishRun:
    """:func:`publish` with the GitHub tracker and collector clients the configuration names."""
    with ExitStack() as stack:
        tracker = None
        clients: dict[str, CollectorClient] = {}
        if not dry_run:
            tracker = IssueTracker(config.github, config.github.token())
            stack.callback(tracker.close)
            for source in config.sources:
                if isinstance(source, HttpCollectorConfig) and source.known_issues:
                    clients[source.name] = stack.enter_context(CollectorClient(source.url, source.key(), retries=source.retries))
        warehouse = stack.enter_context(Warehouse(config.warehouse.path))
        return publish(config, warehouse, tracker, clients, dry_run=dry_run)


def _target(config: Config, draft: dict[str, Any], run: PublishRun) -> str | None:
    """The repository an approved draft is filed on, or None with the reason noted in ``run``:
    one decision for a run and its dry run, so ``--dry-run`` says what the run will do."""
    if draft["cluster_status"] in ("merged", "ignored"):
        # Filing it would duplicate the cluster it was merged into, or file what was silenced.
        where = f" into {draft['merged_into']}" if draft["merged_into"] else ""
        run.skipped.append(f"draft {draft['id']}: cluster {draft['cluster_id']} was {draft['cluster_status']}{where} after approval; not filed")
        return None
    repo = config.github.repo_for(draft["service"])
    if repo is None:
        run.errors.append(f"draft {draft['id']}: no repository for service {draft['service']!r}: set github.repos or github.default_repo")
    return repo


def _file(
    config: Config, warehouse: Warehouse, tracker: IssueTracker, draft: dict[str, Any], repo: str, run: PublishRun
) -> None:
    try:
        state, created = tracker.file_once(repo, draft["cluster_id"], draft["title"], draft["body"], draft["labels"])
    except GitHubError as exc:
        run.errors.append(f"draft {draft['id']}: {exc}")
        return
    status = state.known_status(config.github.status_labels)
    now = now_utc()
    with transaction(warehouse.con):
        warehouse.con.execute(
            """UPDATE drafts SET status = 'filed', repo = ?, issue_number = ?, issue_url = ?, filed_at = ?,
                   known_status = ?, updated_at = ?, filed_body_sha256 = sha256(body) WHERE id = ?""",
            [repo, state.number, state.url, now, status, now, draft["id"]],
        )
        _set_cluster_status(warehouse, draft["cluster_id"], status, state)
        record_action(warehouse, draft["id"], "filed" if created else "adopted", PIPELINE_ACTOR, {"url": state.url})
    (run.filed if created else run.adopted).append((draft["id"], state.url))


def _ours(config: Config, draft: dict[str, Any]) -> bool:
    """Whether the filed issue is in a repository this configuration publishes to: every issue
    we filed is; one a person filed by hand may be anywhere."""
    if draft["drafted_by"] != "hand":
        return True
    return draft["repo"] is not None and draft["repo"].lower() in {
        repo.lower() for repo in (*config.github.repos.values(), config.github.default_repo) if repo}


def _sync(config: Config, warehouse: Warehouse, tracker: IssueTracker, draft: dict[str, Any], run: PublishRun) -> None:
    try:
        state = tracker.state(draft["repo"], draft["issue_number"])
    except GitHubError as exc:
        run.errors.append(f"draft {draft['id']}: {exc}")
        return
    if state.repo is not None and (state.repo.lower(), state.number) != (draft["repo"].lower(), draft["issue_number"]):
        _moved(warehouse, draft, state)  # GitHub's names ignore case: only a transfer is a move
    status = state.known_status(config.github.status_labels)
    if status == draft["known_status"]:
        return
    with transaction(warehouse.con):
        warehouse.con.execute(
            "UPDATE drafts SET known_status = ?, updated_at = ? WHERE id = ?", [status, now_utc(), draft["id"]]
        )
        _set_cluster_status(warehouse, draft["cluster_id"], status, state)
        record_action(warehouse, draft["id"], "status", PIPELINE_ACTOR, {"from": draft["known_status"], "to": status})
    run.status_changes.append((draft["id"], draft["known_status"], status))


def _moved(warehouse: Warehouse, draft: dict[str, Any], state: IssueState) -> None:
    """The issue was transferred (GitHub answered 301, followed): remember where it is now, so
    later runs, the known_issue url and write-back point at its new home, not at the redirect."""
    with transaction(warehouse.con):
        warehouse.con.execute(
            "UPDATE drafts SET repo = ?, issue_number = ?, issue_url = ?, updated_at = ? WHERE id = ?",
            [state.repo, state.number, state.url, now_utc(), draft["id"]],
        )
        record_action(warehouse, draft["id"], "moved", PIPELINE_ACTOR, {"from": draft["issue_url"], "to": state.url})


def _update_demand(
    config: Config, warehouse: Warehouse, tracker: IssueTracker, draft: dict[str, Any], figures: dict[str, Any], run: PublishRun
) -> None:
    """A comment with the new figures (the issue body may have been edited on GitHub since: it
    is left alone); the draft then remembers the demand it last reported."""
    inputs = draft_input(warehouse, figures)
    body = render_update(inputs, draft["accounts"], config.drafts)
    try:
        comment, _ = tracker.comment_once(
            draft["repo"], draft["issue_number"], update_marker(draft["cluster_id"], figures["accounts"]), body)
    except GitHubError as exc:
        run.errors.append(f"draft {draft['id']}: {exc}")
        return
    newest = inputs.newest()
    with transaction(warehouse.con):
        warehouse.con.execute(
            "UPDATE drafts SET accounts = ?, reports = ?, blocking_reports = ?, updated_at = ? WHERE id = ?",
            [figures["accounts"], figures["reports"], figures["blocking_reports"], now_utc(), draft["id"]],
        )
        if newest is not None:  # what the comment quotes, so that erasing it reaches the comment
            warehouse.con.execute(
                "INSERT INTO update_comments VALUES (?, ?, ?, ?, sha256(?), ?) ON CONFLICT DO NOTHING",
                [draft["id"], comment.id, newest["collector"], newest["id"], comment.body, now_utc()],
            )
        record_action(warehouse, draft["id"], "demand update", PIPELINE_ACTOR,
                      {"from": draft["accounts"], "to": figures["accounts"]})
    run.updates.append((draft["id"], figures["accounts"]))


def _set_cluster_status(warehouse: Warehouse, cluster_id: int, status: str, state: IssueState) -> None:
    """Closing the issue closes the cluster (fixed_at marks where regressions start);
    reopening opens it. Ignored and merged clusters keep their status."""
    warehouse.con.execute(
        """UPDATE clusters SET status = ?, fixed_at = ?, updated_at = ?
           WHERE id = ? AND status IN ('open', 'fixed', 'wont_fix')""",
        [_CLUSTER_STATUS.get(status, "open"), state.closed_at if status == "fixed" else None, now_utc(), cluster_id],
    )
