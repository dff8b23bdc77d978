"""The clustering commands: ``cluster`` (stateless) and ``clusters …`` (the warehouse's clusters)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.markup import escape

from ._app import ByOption, ConfigOption, ReasonOption, UserError, actor, app, err, in_warehouse, load_config, out

if TYPE_CHECKING:
    from ..config import Config
    from ..warehouse import Warehouse

clusters_app = typer.Typer(help="Clusters of duplicate reports: demand, and maintainers' corrections.")
app.add_typer(clusters_app, name="clusters")

ViewOption = Annotated[str, typer.Option("--view", help="reports | goals")]
SourceOption = Annotated[str | None, typer.Option(
    "--source", help="Only reports from agent | runtime | human (or one source value, e.g. server_observed).")]
T = TypeVar("T")

#: The figures ``clusters show`` prints, in order; counts are 0 for a cluster with no live report.
SHOWN = ("service", "accounts", "accounts_this_week", "accounts_last_week", "accounts_agent", "accounts_runtime",
         "accounts_human", "reports", "anonymous_reports", "dismissed_reports", "sessions", "tools", "first_seen",
         "last_seen", "trend", "regression", "score", "severities", "outcomes", "expectation_gaps",
         "high_severity_language", "mean_sentiment", "mean_specificity")
_COUNTS = {"accounts", "accounts_this_week", "accounts_last_week", "accounts_agent", "accounts_runtime",
           "accounts_human", "reports", "anonymous_reports", "sessions", "expectation_gaps", "high_severity_language"}


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

    from ..clusters import MiniLMEmbedder, cluster_new_records
    from ..warehouse import Warehouse

    with Warehouse(cfg.warehouse.path) as warehouse, Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        console=err, transient=True,
    ) as progress:
        task = progress.add_task("embed + cluster", total=None)
        summary = cluster_new_records(
            warehouse, MiniLMEmbedder(cfg.embedding), cfg.clustering,
            on_embed=lambda n: progress.advance(task, n),
            on_total=lambda n: progress.update(task, total=n, completed=0),
        )
    out.print(f"[bold]clusters[/]: {summary.line('reports')}", highlight=False)
    out.print(f"[bold]goal themes[/]: {summary.line('goals')}", highlight=False)


@app.command("cluster")
def cluster_file(
    input: Annotated[Path, typer.Option("--input", "-i", exists=True, dir_okay=False,
                                        help="JSONL: canonical records or {id, text} objects.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="JSONL: one {id, cluster_id} line per input.")],
    text_field: Annotated[str, typer.Option("--text-field", help="Field holding the text (absent: compose from canonical fields).")] = "text",
    id_field: Annotated[str, typer.Option("--id-field", help="Field holding the id.")] = "id",
    config: ConfigOption = None,
) -> None:
    """Cluster a file with the pipeline's embedder and algorithm, without a warehouse."""
    from ..clusters import InputError, MiniLMEmbedder, cluster_inputs, read_inputs, write_outputs

    cfg = load_config(config)
    try:
        inputs = read_inputs(input, text_field, id_field)
    except InputError as exc:
        raise UserError(str(exc)) from None
    with err.status(f"embedding and clustering {inputs.height} texts"):
        result = cluster_inputs(inputs, MiniLMEmbedder(cfg.embedding), cfg.clustering)
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


@clusters_app.command("list")
def clusters_list(
    config: ConfigOption = None,
    view: ViewOption = "reports",
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show this many (0 = all).")] = 30,
    as_of: Annotated[datetime | None, typer.Option("--as-of", help="Figures as of this instant (default: newest report).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON line per cluster with every figure.")] = False,
    all_: Annotated[bool, typer.Option("--all", help="Include ignored clusters.")] = False,
    source: SourceOption = None,
) -> None:
    """Clusters by ranking score, with distinct accounts (and who reported), trend and the rest
    of the demand; ``--source`` counts only one tier's reports."""
    import orjson
    from rich.table import Table

    from ..clusters import VIEWS, demand
    from ..warehouse import Warehouse

    if view not in VIEWS:
        raise UserError(f"--view must be one of: {', '.join(VIEWS)} (got {view!r})")
    sources = source_filter(source)
    cfg = load_config(config)
    with Warehouse(cfg.warehouse.path) as warehouse:
        frame = demand(warehouse, as_of=as_of, view=view, half_life_days=cfg.demand.half_life_days, sources=sources)
    if not all_:
        frame = frame.filter(frame["status"] != "ignored")
    if limit:
        frame = frame.head(limit)
    if as_json:
        for row in frame.iter_rows(named=True):
            out.file.write(orjson.dumps(row, default=str).decode() + "\n")
        return
    table = Table("id", "service", "kind", "label", "accounts", "a/r/h", "this wk", "last wk", "reports", "trend",
                  "score", caption="a/r/h: the accounts that reported as agents / runtimes / humans")
    for row in frame.iter_rows(named=True):
        trend = "[red]regression[/]" if row["regression"] else row["trend"]
        if row["status"] != "open":
            trend += f" ({row['status']})"
        table.add_row(
            str(row["cluster_id"]), row["service"] or "—", row["polarity"], escape(row["label"] or ""),
            str(row["accounts"]), f"{row['accounts_agent']}/{row['accounts_runtime']}/{row['accounts_human']}",
            str(row["accounts_this_week"]), str(row["accounts_last_week"]),
            str(row["reports"]), trend, f"{row['score']:.2f}",
        )
    out.print(table)


@clusters_app.command("show")
def clusters_show(
    cluster_id: Annotated[int, typer.Argument(help="Cluster id.")],
    config: ConfigOption = None,
) -> None:
    """One cluster: its demand figures and its reports (scrubbed text; dismissed ones marked,
    and left out of every figure)."""
    from ..clusters import demand
    from ..warehouse import Warehouse

    cfg = load_config(config)
    with Warehouse(cfg.warehouse.path) as warehouse:
        found = warehouse.con.execute(
            "SELECT view, status, merged_into, label, medoid_id, service FROM clusters WHERE id = ?", [cluster_id]
        ).fetchall()
        if not found:
            raise UserError(f"no cluster {cluster_id}")
        view, status, merged_into, label, medoid_id, service = found[0]
        if status == "merged":
            raise UserError(f"cluster {cluster_id} was merged into {merged_into}: clusters show {merged_into}")
        rows = demand(warehouse, view=view, half_life_days=cfg.demand.half_life_days).filter(cluster_id=cluster_id)
        reports = warehouse.con.execute(
            """SELECT r.id, r.received_at, r.account, coalesce(r.summary, r.goal, r.detail, ''),
                      r.status IS NOT DISTINCT FROM 'dismissed' FROM cluster_members m
               JOIN records r USING (collector, id) WHERE m.cluster_id = ? ORDER BY r.received_at""",
            [cluster_id],
        ).fetchall()
    dismissed = sum(1 for *_, is_dismissed in reports if is_dismissed)
    figures = rows.row(0, named=True) if rows.height else _no_live_reports(service, dismissed)
    out.print(f"[bold]cluster {cluster_id}[/]: {escape(label or '')}  ({status})", highlight=False)
    for key in SHOWN:
        out.print(f"  {key}: {escape(str(figures[key]))}", highlight=False)
    for record_id, received_at, account, text, is_dismissed in reports:
        marker = "★" if record_id == medoid_id else " "
        note = " (dismissed)" if is_dismissed else ""
        out.print(f" {marker} {received_at:%Y-%m-%d} {account or 'anonymous'} {record_id}{note}: {escape(text[:160])}",
                  highlight=False)


def _no_live_reports(service: str | None, dismissed: int) -> dict[str, object]:
    """The figures of a cluster whose every report was dismissed: no demand at all."""
    figures: dict[str, object] = dict.fromkeys(SHOWN) | dict.fromkeys(_COUNTS, 0)
    return figures | {"service": service, "dismissed_reports": dismissed, "score": 0.0, "tools": []}


def _correct(action: Callable[[Warehouse], T], cfg: Config) -> T:
    from ..clusters import CorrectionError

    return in_warehouse(cfg, action, CorrectionError)


@clusters_app.command("merge")
def clusters_merge(
    into: Annotated[int, typer.Argument(help="The cluster that stays.")],
    other: Annotated[int, typer.Argument(help="The cluster merged into it.")],
    by: ByOption = None, reason: ReasonOption = None, config: ConfigOption = None,
) -> None:
    """Merge cluster OTHER into INTO (OTHER keeps a merged_into pointer)."""
    from ..clusters import merge

    _correct(lambda w: merge(w, into, other, actor(by), reason), load_config(config))
    out.print(f"merged cluster {other} into {into}")


@clusters_app.command("split")
def clusters_split(
    cluster_id: Annotated[int, typer.Argument(help="The cluster to split.")],
    records: Annotated[list[str], typer.Argument(help="Record ids (or collector:id) to move into a new cluster.")],
    by: ByOption = None, reason: ReasonOption = None, config: ConfigOption = None,
) -> None:
    """Move records out of a cluster into a new one."""
    from ..clusters import split

    new_id = _correct(lambda w: split(w, cluster_id, records, actor(by), reason), load_config(config))
    out.print(f"moved {len(records)} records from cluster {cluster_id} into new cluster {new_id}")


@clusters_app.command("ignore")
def clusters_ignore(
    cluster_id: Annotated[int, typer.Argument(help="The cluster to ignore.")],
    by: ByOption = None, reason: ReasonOption = None, config: ConfigOption = None,
) -> None:
    """Ignore a cluster: no drafts, left out of rankings; it still absorbs its new reports."""
    from ..clusters import set_ignored

    _correct(lambda w: set_ignored(w, cluster_id, actor(by), True, reason), load_config(config))
    out.print(f"ignored cluster {cluster_id}")


@clusters_app.command("unignore")
def clusters_unignore(
    cluster_id: Annotated[int, typer.Argument(help="The cluster to take back.")],
    by: ByOption = None, reason: ReasonOption = None, config: ConfigOption = None,
) -> None:
    """Take back an ignore."""
    from ..clusters import set_ignored

    _correct(lambda w: set_ignored(w, cluster_id, actor(by), False, reason), load_config(config))
    out.print(f"cluster {cluster_id} is open again")
