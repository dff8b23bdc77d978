"""The clustering commands: ``cluster`` (stateless) and ``clusters …`` (the warehouse's clusters)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from ._app import (
    ByOption,
    ConfigOption,
    IdFieldOption,
    InputFileOption,
    ReasonOption,
    Refused,
    TextFieldOption,
    UserError,
    actor,
    app,
    err,
    example,
    in_warehouse,
    load_config,
    open_warehouse,
    out,
    refuse_without_text,
)
from ._tables import Column, FormatOption, cell, chosen_format, emit, fields_text, table_width, wrap

if TYPE_CHECKING:
    from ..config import Config
    from ..drafts import ChatClient, Correction
    from ..warehouse import Warehouse

clusters_app = typer.Typer(
    no_args_is_help=True,
    help="Clusters of duplicate reports: demand, and maintainers' corrections.",
    epilog=example("clusters list -n 10", "clusters list --unclustered", "clusters show 4",
                   "clusters merge 4 9 --reason 'same missing filter'"),
)
app.add_typer(clusters_app, name="clusters")

ViewOption = Annotated[str, typer.Option("--view", help="reports | goals")]
SourceOption = Annotated[str | None, typer.Option(
    "--source", help="Only reports from agent | runtime | human (or one source value, e.g. server_observed).")]

#: How far a report's words are indented below its line in ``clusters show``.
REPORT_INDENT = "     "
#: The figures ``clusters show`` prints, in order; counts are 0 for a cluster with no live report.
SHOWN = ("service", "accounts", "accounts_this_week", "accounts_last_week", "accounts_agent", "accounts_runtime",
         "accounts_human", "reports", "anonymous_reports", "dismissed_reports", "sessions", "tools", "first_seen",
         "last_seen", "trend", "regression", "score", "severities", "outcomes", "expectation_gaps",
         "high_severity_language", "mean_sentiment", "mean_specificity")
_COUNTS = {"accounts", "accounts_this_week", "accounts_last_week", "accounts_agent", "accounts_runtime",
           "accounts_human", "reports", "anonymous_reports", "sessions", "expectation_gaps", "high_severity_language"}
#: What ``clusters list --json`` gives of each cluster, in this order (README, "Clusters and
#: demand"): the cluster, its demand as of ``as_of`` (this week is ``week``, from ``week_start``),
#: its draft and issue (null when it has none), and its times.
LISTED = (
    "cluster_id", "view", "service", "polarity", "status", "label", "confidence", "needs_review", "config_version",
    "accounts", "accounts_this_week", "accounts_last_week", "accounts_agent", "accounts_runtime", "accounts_human",
    "reports", "reports_this_week", "reports_last_week", "reports_agent", "reports_runtime", "reports_human",
    "anonymous_reports", "dismissed_reports", "blocking_reports", "sessions", "tools", "first_seen", "last_seen",
    "lanes", "categories", "severities", "outcomes", "expectation_gaps", "high_severity_language", "mean_sentiment",
    "mean_specificity", "trend", "regression", "score", "week", "week_start", "as_of",
    "draft_id", "draft_status", "draft_title", "known_status", "repo", "issue_number", "issue_url",
    "fixed_at", "created_at", "updated_at",
)
#: What ``clusters list --unclustered --json`` gives of each report in no cluster, in this order.
UNCLUSTERED = ("collector", "id", "service", "received_at", "source", "lane", "category", "severity", "outcome",
               "anonymous", "why", "summary", "detail")
#: The kinds of cluster (``polarity``) ``clusters list --kind`` takes.
KINDS = ("problem", "request", "praise")
#: The statuses ``clusters list --status`` takes (merged clusters live on only as pointers).
LISTED_STATUSES = ("open", "ignored", "fixed", "wont_fix")
AS_OF_HELP = ("Figures as of this instant (UTC unless it says): reports received before it count, and this week is "
              "its ISO week (default: just after the newest report; 2026-11-30 gives the 2026-W48 digest's).")


def source_filter(source: str | None) -> tuple[str, ...] | None:
    """The ``source`` values ``--source`` stands for (None: every report)."""
    from ..core.vocabulary import sources_of

    if source is None:
        return None
    try:
        return sources_of(source)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def cluster_with_progress(cfg: Config) -> None:
    """The pipeline stage, with a progress bar over the texts being embedded."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    from ..clusters import cluster_assist, cluster_new_records, embedder_for
    from ..drafts import merge_clusters

    def merge(wh: Warehouse, into: int, other: int, actor: str, reason: str) -> None:
        """A merge the LLM judged right reaches the drafts as a maintainer's would."""
        merge_clusters(cfg, wh, into, other, actor, reason)

    with open_warehouse(cfg) as warehouse, cluster_assist(cfg.llm, merge=merge) as assist, Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        console=err, transient=True,
    ) as progress:
        task = progress.add_task("embed + cluster", total=None)
        summary = cluster_new_records(
            warehouse, embedder_for(cfg.embedding), cfg.clustering,
            on_embed=lambda n: progress.advance(task, n),
            on_total=lambda n: progress.update(task, total=n, completed=0),
            assist=assist,
        )
    out.print(f"[bold]clusters[/]: {summary.line('reports')}", highlight=False)
    out.print(f"[bold]goal themes[/]: {summary.line('goals')}", highlight=False)
    if assist:
        colour = "yellow" if assist.assistant.failure else "bold"
        out.print(f"[{colour}]llm[/]: {escape(assist.line())}", highlight=False)


@app.command("cluster")
def cluster_file(
    input: InputFileOption,
    output: Annotated[Path, typer.Option("--output", "-o", help="JSONL: one {id, cluster_id} line per input.")],
    text_field: TextFieldOption = "text",
    id_field: IdFieldOption = "id",
    config: ConfigOption = None,
) -> None:
    """Cluster a file with the pipeline's embedder and algorithm, without a warehouse."""
    from ..clusters import InputError, cluster_inputs, embedder_for, read_inputs, write_outputs

    cfg = load_config(config)
    try:
        inputs = read_inputs(input, text_field, id_field)
    except InputError as exc:
        raise Refused(str(exc)) from None
    refuse_without_text(input, inputs.height, int(inputs.get_column("text").is_not_null().sum()), text_field)
    with err.status(f"embedding and clustering {inputs.height} texts"):
        result = cluster_inputs(inputs, embedder_for(cfg.embedding), cfg.clustering)
    write_outputs(result, output)
    clustered = result.filter(result["cluster_id"].is_not_null())
    err.print(
        f"{result.height} inputs → {clustered['cluster_id'].n_unique()} clusters "
        f"({clustered.height} clustered, {result.height - clustered.height} unclustered) → {output}",
        highlight=False,
    )


@clusters_app.command("update")
def clusters_update(config: ConfigOption = None) -> None:
    """Embed and cluster every record not yet in a cluster (the pipeline's clustering stage)."""
    cluster_with_progress(load_config(config))


def _trend(row: Mapping[str, Any]) -> str:
    return "regression" if row["regression"] else row["trend"]


def _cluster_label(row: Mapping[str, Any]) -> str:
    """The label, with what a reader must know beside it: a status other than open, and
    whether the cluster needs review."""
    notes = ([row["status"]] if row["status"] != "open" else []) + (["review"] if row["needs_review"] else [])
    return (row["label"] or "") + (f" ({', '.join(notes)})" if notes else "")


#: ``clusters list``'s table; at 80 columns kind, reports, score and service are left out,
#: in that order, then a/r/h and this/last (README, "Clusters and demand").
CLUSTER_COLUMNS = (
    Column("id", lambda r: r["cluster_id"], number=True),
    Column("service", lambda r: r["service"], drop=4),
    Column("kind", lambda r: r["polarity"], drop=1),
    Column("label", _cluster_label, wraps=True),
    Column("accounts", lambda r: r["accounts"], number=True),
    Column("a/r/h", lambda r: f"{r['accounts_agent']}/{r['accounts_runtime']}/{r['accounts_human']}", number=True,
           drop=5),
    Column("this/last", lambda r: f"{r['accounts_this_week']}/{r['accounts_last_week']}", number=True, drop=6),
    Column("reports", lambda r: r["reports"], number=True, drop=2),
    Column("trend", _trend),
    Column("score", lambda r: f"{r['score']:.2f}", number=True, drop=3),
)
#: ``clusters list --unclustered``'s table.
UNCLUSTERED_COLUMNS = (
    Column("report", lambda r: f"{r['collector']}:{r['id']}", whole=True),
    Column("service", lambda r: r["service"], drop=4),
    Column("received", lambda r: f"{r['received_at']:%Y-%m-%d}", whole=True, drop=3),
    Column("lane", lambda r: r["lane"], drop=1),
    Column("severity", lambda r: r["severity"], drop=2),
    # Why it is alone, then its words: one wrapping column, since a report's id (never cut)
    # may take half the width.
    Column("why: words", lambda r: f"{r['why']}: {(r['summary'] or '')[:160]}", wraps=True),
)


@clusters_app.command("list")
def clusters_list(
    config: ConfigOption = None,
    view: ViewOption = "reports",
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show this many (0 = all).")] = 30,
    as_of: Annotated[datetime | None, typer.Option("--as-of", help=AS_OF_HELP)] = None,
    format: FormatOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="--format json: one JSON line per cluster, every field.")] = False,
    all_: Annotated[bool, typer.Option("--all", help="Include ignored clusters.")] = False,
    status: Annotated[str | None, typer.Option(
        "--status", help=f"Only clusters of this status: {' | '.join(LISTED_STATUSES)}.")] = None,
    source: SourceOption = None,
    kind: Annotated[str | None, typer.Option(
        "--kind", help=f"Only clusters of this kind: {' | '.join(KINDS)} (the kind column).")] = None,
    unclustered: Annotated[bool, typer.Option(
        "--unclustered", help="List the reports in no cluster instead, each with why (problems first).")] = False,
) -> None:
    """Clusters by ranking score, with their kind (problem, request, praise), distinct accounts
    (and who reported), trend and the rest of the demand; ignored ones only with --all or
    --status ignored; --source counts only one tier's reports. --unclustered lists the reports
    no cluster holds, so that none goes unread. The table fits the width (80 columns when
    not a terminal): the label wraps, and kind, reports, score and service are left out, in
    that order, when there is no room; --format tsv, csv or json give every field."""
    import polars as pl

    from ..clusters import VIEWS, demand
    from ..drafts import cluster_drafts

    shape = chosen_format(format, as_json)
    if view not in VIEWS:
        raise UserError(f"--view must be one of: {', '.join(VIEWS)} (got {view!r})")
    if status is not None and status not in LISTED_STATUSES:
        raise UserError(f"--status must be one of: {', '.join(LISTED_STATUSES)} (got {status!r})")
    if kind is not None and kind not in KINDS:
        raise UserError(f"--kind must be one of: {', '.join(KINDS)} (got {kind!r})")
    sources = source_filter(source)
    cfg = load_config(config)
    if unclustered:
        if view != "reports":
            raise UserError("--unclustered lists reports: every report is in the reports view (leave --view out)")
        _list_unclustered(cfg, as_of, sources, limit, shape)
        return
    with open_warehouse(cfg) as warehouse:
        frame = demand(warehouse, as_of=as_of, view=view, half_life_days=cfg.demand.half_life_days, sources=sources)
        drafts = cluster_drafts(warehouse)
    if frame.is_empty():
        if shape == "table":
            out.print("no clusters with reports yet (feedback-insights clusters update makes them)")
        else:
            emit([], LISTED, CLUSTER_COLUMNS, shape)
        return
    week, counted_to = frame["week"][0], frame["as_of"][0]
    if status is not None:
        frame = frame.filter(pl.col("status") == status)
    elif not all_:
        frame = frame.filter(pl.col("status") != "ignored")
    if kind is not None:
        frame = frame.filter(pl.col("polarity") == kind)
    if limit:
        frame = frame.head(limit)
    rows = frame.join(drafts, on="cluster_id", how="left", maintain_order="left").select(LISTED).to_dicts()
    emit(rows, LISTED, CLUSTER_COLUMNS, shape, caption=(
        f"this week: {week}, Monday 00:00 UTC to {counted_to:%Y-%m-%d %H:%M} UTC · this/last: the accounts of "
        "this week / last week, which the trend compares · a/r/h: the accounts that reported as agents / "
        "runtimes / humans · review: low confidence, not drafted automatically (clusters show ID) · clusters "
        "list --unclustered: the reports in no cluster"))


def _list_unclustered(cfg: Config, as_of: datetime | None, sources: tuple[str, ...] | None, limit: int,
                      shape: str) -> None:
    """``clusters list --unclustered``: the reports in no cluster (received before ``as_of``
    when given), a count per service, then the reports, problems first."""
    from ..clusters import unclustered, unclustered_services, weeks

    end = weeks(as_of).as_of if as_of else None  # read as every --as-of is (UTC unless it says)
    with open_warehouse(cfg) as warehouse:
        rows = unclustered(warehouse, end=end, sources=sources)
        services = unclustered_services(warehouse, end=end, sources=sources, examples=0)
    shown = (rows.head(limit) if limit else rows).select(UNCLUSTERED).to_dicts()
    if shape != "table":
        emit(shown, UNCLUSTERED, UNCLUSTERED_COLUMNS, shape)
        return
    if rows.is_empty():
        out.print("no report is in no cluster: every one is in a cluster")
        return
    counts = ", ".join(f"{s['service'] or 'no service'} {s['reports']}" for s in services.iter_rows(named=True))
    emit(shown, UNCLUSTERED, UNCLUSTERED_COLUMNS, shape, title=cell(f"{rows.height} reports in no cluster ({counts})"),
         caption=f"{len(shown)} of {rows.height} shown (-n 0: all) · clusters move REPORT --to CLUSTER puts one in a cluster")


@clusters_app.command("show")
def clusters_show(
    cluster_id: Annotated[int, typer.Argument(help="Cluster id.")],
    as_of: Annotated[datetime | None, typer.Option("--as-of", help=AS_OF_HELP)] = None,
    config: ConfigOption = None,
) -> None:
    """One cluster: its confidence, draft, demand figures and its reports (scrubbed text;
    dismissed ones marked, and left out of every figure)."""
    from ..clusters import demand
    from ..drafts import cluster_drafts

    cfg = load_config(config)
    with open_warehouse(cfg) as warehouse:
        found = warehouse.con.execute(
            """SELECT view, status, merged_into, label, medoid_id, service, confidence,
                      coalesce(needs_review, false), config_version FROM clusters WHERE id = ?""", [cluster_id]
        ).fetchall()
        if not found:
            raise Refused(f"no cluster {cluster_id}")
        view, status, merged_into, label, medoid_id, service, confidence, needs_review, version = found[0]
        if status == "merged":
            raise Refused(f"cluster {cluster_id} was merged into {merged_into}: clusters show {merged_into}")
        rows = demand(warehouse, as_of=as_of, view=view, half_life_days=cfg.demand.half_life_days).filter(
            cluster_id=cluster_id)
        drafted = cluster_drafts(warehouse).filter(cluster_id=cluster_id).to_dicts()
        reports = warehouse.con.execute(
            """SELECT r.id, r.received_at, r.account, coalesce(r.summary, r.goal, r.detail, ''),
                      r.status IS NOT DISTINCT FROM 'dismissed' FROM cluster_members m
               JOIN records r USING (collector, id) WHERE m.cluster_id = ? ORDER BY r.received_at""",
            [cluster_id],
        ).fetchall()
    dismissed = sum(1 for *_, is_dismissed in reports if is_dismissed)
    figures = rows.row(0, named=True) if rows.height else _no_live_reports(service, dismissed)
    say = _plain_lines
    say(f"cluster {cluster_id}: {cell(label)}  ({status})")
    shown = "unknown" if confidence is None else f"{confidence:.2f}"
    say(f"  confidence: {shown} (clustering config {cell(version or 'unrecorded')})")
    if needs_review:
        say(f"  needs review: not drafted automatically (drafts create {cluster_id} drafts it)")
    for d in drafted:
        issue = f", issue {cell(d['issue_url'])} ({d['known_status']})" if d["issue_url"] else ""
        say(f"  draft: {d['draft_id']} ({d['draft_status']}){issue}")
    if rows.height:
        say(f"  as of: {figures['as_of']:%Y-%m-%d %H:%M:%S} UTC (this week: {figures['week']}, "
            f"from Monday {figures['week_start']:%Y-%m-%d})")
    for key in SHOWN:
        say(f"  {key}: {fields_text(figures[key])}")
    width = table_width() - len(REPORT_INDENT)
    for record_id, received_at, account, text, is_dismissed in reports:
        marker = "★" if record_id == medoid_id else " "
        note = " (dismissed)" if is_dismissed else ""
        say(f" {marker} {received_at:%Y-%m-%d} {account or 'anonymous'} {cell(record_id)}{note}")
        for line in wrap(cell(text[:160]), width):  # its words below it, in the width
            say(REPORT_INDENT + line)


def _plain_lines(line: str) -> None:
    """One line of ``show``, as it is: no markup, no emoji code (report text is in it)."""
    out.print(line, markup=False, highlight=False)


def _no_live_reports(service: str | None, dismissed: int) -> dict[str, object]:
    """The figures of a cluster whose every report was dismissed: no demand at all."""
    figures: dict[str, object] = dict.fromkeys(SHOWN) | dict.fromkeys(_COUNTS, 0)
    return figures | {"service": service, "dismissed_reports": dismissed, "score": 0.0, "tools": []}


def _correct(action: Callable[[Config, Warehouse, ChatClient | None], Correction], config: Path | None,
             headline: Callable[[Correction], str], undoable: bool = False) -> None:
    """Run a correction and what follows for the drafts (LLM-assisted when ``[llm]`` is
    configured, as the drafting stage is), then print what it did to the drafts, and (when
    ``undoable``: a merge, split or move) how to take it back."""
    from ..clusters import CorrectionError
    from ..drafts import ChatClient

    cfg = load_config(config)
    client = ChatClient(cfg.llm) if cfg.llm else None
    try:
        done = in_warehouse(cfg, lambda w: action(cfg, w, client), CorrectionError)
    finally:
        if client:
            client.close()
    out.print(headline(done), highlight=False)
    for line in done.lines():
        out.print(escape(line), highlight=False)
    if undoable and done.action is not None:
        out.print(f"undo it: feedback-insights clusters undo {done.action}", highlight=False)


@clusters_app.command("merge")
def clusters_merge(
    into: Annotated[int, typer.Argument(help="The cluster that stays.")],
    other: Annotated[int, typer.Argument(help="The cluster merged into it.")],
    by: ByOption = None, reason: ReasonOption = None, config: ConfigOption = None,
) -> None:
    """Merge cluster OTHER into INTO (OTHER keeps a merged_into pointer). OTHER's draft is
    superseded; when both issues are filed, INTO's survives and the next publish closes OTHER's
    as its duplicate."""
    from ..drafts import merge_clusters

    _correct(lambda c, w, llm: merge_clusters(c, w, into, other, actor(by), reason, llm), config,
             lambda _: f"merged cluster {other} into {into}", undoable=True)


@clusters_app.command("split")
def clusters_split(
    cluster_id: Annotated[int, typer.Argument(help="The cluster to split.")],
    records: Annotated[list[str], typer.Argument(help="Record ids (or collector:id) to move into a new cluster.")],
    by: ByOption = None, reason: ReasonOption = None, config: ConfigOption = None,
) -> None:
    """Move records out of a cluster into a new one; the cluster's pending draft is re-rendered."""
    from ..drafts import split_cluster

    _correct(lambda c, w, llm: split_cluster(c, w, cluster_id, records, actor(by), reason, llm), config,
             lambda done: f"moved {len(records)} records from cluster {cluster_id} into new cluster {done.new_cluster}",
             undoable=True)


@clusters_app.command("move")
def clusters_move(
    records: Annotated[list[str], typer.Argument(help="Record ids (or collector:id), in a cluster or in none.")],
    to: Annotated[int, typer.Option("--to", help="The cluster they join: same service, problem or praise.")],
    by: ByOption = None, reason: ReasonOption = None, config: ConfigOption = None,
) -> None:
    """Move reports into another cluster of their service (a problem report may join praise, and
    the other way round); the drafts of the clusters they left and joined are re-rendered."""
    from ..drafts import move_records

    _correct(lambda c, w, llm: move_records(c, w, records, to, actor(by), reason, llm), config,
             lambda _: f"moved {len(records)} records into cluster {to}", undoable=True)


@clusters_app.command("unmerge")
def clusters_unmerge(
    cluster_id: Annotated[int, typer.Argument(help="The cluster merged away (clusters show names where it went).")],
    by: ByOption = None, config: ConfigOption = None,
) -> None:
    """Take back the newest merge that absorbed cluster ID, a maintainer's or the LLM's (as
    clusters undo does): the cluster is back with its id, name and reports, its superseded
    draft pending again, and the survivor's pending draft re-rendered. An LLM's merge is never
    put to the model again."""
    from ..drafts import unmerge_cluster

    def headline(done: Correction) -> str:
        if done.new_cluster is not None:  # an LLM's merge recorded before merges kept their reports
            return f"cluster {cluster_id}'s reports are cluster {done.new_cluster} again"
        return f"took back the merge of cluster {cluster_id}"

    _correct(lambda c, w, llm: unmerge_cluster(c, w, cluster_id, actor(by), llm), config, headline)


@clusters_app.command("undo")
def clusters_undo(
    action: Annotated[int, typer.Argument(help="The correction (#id in clusters history).")],
    by: ByOption = None, reason: ReasonOption = None, config: ConfigOption = None,
) -> None:
    """Take back a merge, split, move or rename (a maintainer's or the LLM's): a merged cluster
    is back with its id, name, reports and draft; a split-off cluster is merged back; moved
    reports go back where they were; the drafts that follow are re-rendered. clusters history
    lists the corrections and which can be undone."""
    from ..drafts import undo_correction

    _correct(lambda c, w, llm: undo_correction(c, w, action, actor(by), reason, llm), config,
             lambda _: f"undid correction #{action}")


#: ``clusters history``'s table; short of room, when and can undo go, in that order.
HISTORY_COLUMNS = (
    Column("#", lambda a: a["id"], number=True),
    Column("when", lambda a: f"{a['acted_at']:%Y-%m-%d %H:%M}", whole=True, drop=2),
    Column("what", lambda a: a["sentence"], wraps=True),
    Column("undo", lambda a: "yes" if a["can_undo"] else "no", drop=1),
)
#: What ``clusters history --format json|tsv|csv`` gives of each correction, in this order.
HISTORY = ("id", "action", "cluster_id", "other_id", "records", "reason", "actor", "acted_at", "undoes", "undone_by",
           "can_undo", "sentence")


@clusters_app.command("history")
def clusters_history(
    cluster_id: Annotated[int | None, typer.Argument(help="Only the corrections of this cluster (either side).")] = None,
    format: FormatOption = None,
    config: ConfigOption = None,
) -> None:
    """Maintainers' and the LLM's corrections (merge, split, move, rename, ignore, undo), newest
    first, each as a sentence with its #id and whether clusters undo can take it back."""
    from ..clusters import history

    shape = chosen_format(format, False)
    cfg = load_config(config)
    with open_warehouse(cfg) as warehouse:
        actions = history(warehouse, cluster_id)
    rows = [{name: getattr(a, name) for name in HISTORY[:-2]} | {"can_undo": a.can_undo, "sentence": a.sentence()}
            for a in reversed(actions)]
    if shape == "table" and not rows:
        out.print("no corrections yet" + (f" of cluster {cluster_id}" if cluster_id is not None else ""))
        return
    emit(rows, HISTORY, HISTORY_COLUMNS, shape, caption="clusters undo # takes back one marked yes")


@clusters_app.command("ignore")
def clusters_ignore(
    cluster_id: Annotated[int, typer.Argument(help="The cluster to ignore.")],
    by: ByOption = None, reason: ReasonOption = None, config: ConfigOption = None,
) -> None:
    """Ignore a cluster: no drafts, left out of rankings; it still absorbs its new reports."""
    from ..drafts import ignore_cluster

    _correct(lambda c, w, llm: ignore_cluster(c, w, cluster_id, actor(by), True, reason, llm), config,
             lambda _: f"ignored cluster {cluster_id}")


@clusters_app.command("unignore")
def clusters_unignore(
    cluster_id: Annotated[int, typer.Argument(help="The cluster to take back.")],
    by: ByOption = None, reason: ReasonOption = None, config: ConfigOption = None,
) -> None:
    """Take back an ignore; the cluster's pending draft is re-rendered."""
    from ..drafts import ignore_cluster

    _correct(lambda c, w, llm: ignore_cluster(c, w, cluster_id, actor(by), False, reason, llm), config,
             lambda _: f"cluster {cluster_id} is open again")


@clusters_app.command("rebuild")
def clusters_rebuild(
    config: ConfigOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the mapping; change nothing.")] = False,
    by: ByOption = None,
) -> None:
    """Re-cluster every report with the configured clustering version (clustering.version,
    default the latest); clusters keep their id where their members overlap most, and their
    drafts follow as after a merge."""
    from ..clusters import CorrectionError, UnknownVersion, cluster_assist, embedder_for
    from ..drafts import ChatClient, rebuild_clusters

    cfg = load_config(config)
    client = ChatClient(cfg.llm) if cfg.llm else None
    try:
        with err.status("re-clustering every report"), cluster_assist(cfg.llm) as assist:  # [llm] statements
            result, done = in_warehouse(
                cfg, lambda w: rebuild_clusters(cfg, w, embedder_for(cfg.embedding), actor(by), dry_run, client,
                                                assist),
                CorrectionError,
            )
    except UnknownVersion as exc:  # clustering.version: the configuration's, not the data's
        raise UserError(str(exc)) from None
    finally:
        if client:
            client.close()
    for line in [*result.lines(), *done.lines()]:
        out.print(escape(line), highlight=False)
