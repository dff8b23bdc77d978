"""The ingesting commands: ``ingest``, ``signals`` and ``quarantine …``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from ._app import ConfigOption, Refused, app, err, example, load_config, open_warehouse, out
from ._tables import Column, FormatOption, chosen_format, emit

if TYPE_CHECKING:
    from ..config import Config

quarantine_app = typer.Typer(
    no_args_is_help=True,
    help="Reports that failed validation, kept whole until a replay stores them.",
    epilog=example("quarantine list", "quarantine replay  # after fixing the configuration or the source"),
)
app.add_typer(quarantine_app, name="quarantine")


def ingest_with_progress(config: Config) -> None:
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

    from ..ingest import ingest

    with open_warehouse(config) as warehouse, Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed} items"),
        console=err, transient=True,
    ) as progress:
        tasks = {s.name: progress.add_task(f"ingest {s.name}", total=None) for s in config.sources}
        summary = ingest(config, warehouse, on_batch=lambda name, n: progress.advance(tasks[name], n))
    out.print(f"[bold]ingest[/]: {summary.line()}  (warehouse {config.warehouse.path})", highlight=False)
    for error in summary.errors:
        err.print(f"[red]error[/]: {escape(error)}", highlight=False)
    if summary.errors:
        raise typer.Exit(1)


def score_with_progress(config: Config) -> None:
    from rich.progress import Progress, SpinnerColumn, TextColumn

    from ..signals import score_new_records

    with open_warehouse(config) as warehouse, Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed} records"),
        console=err, transient=True,
    ) as progress:
        task = progress.add_task("signals", total=None)
        scored = score_new_records(warehouse, on_batch=lambda n: progress.advance(task, n))
    out.print(f"[bold]signals[/]: scored {scored} new records", highlight=False)


@app.command()
def ingest(config: ConfigOption = None) -> None:
    """Pull every configured source into the warehouse (scrubbed, accounts pseudonymised)."""
    ingest_with_progress(load_config(config))


@app.command()
def signals(config: ConfigOption = None) -> None:
    """Compute RFC-026 signals (sentiment, specificity, topics, expectation gap, severity
    language) for every stored record that has none yet."""
    score_with_progress(load_config(config))


def _problem(entry: Mapping[str, Any]) -> str:
    """The first problem of an entry, and how many more it has."""
    problems = entry["problems"]
    first = problems[0] if problems else {"path": "", "message": ""}
    more = f" (+{len(problems) - 1})" if len(problems) > 1 else ""
    return (f"{first['path']}: {first['message']}" if first["path"] else first["message"]) + more


#: ``quarantine list``'s table; short of room, dialect, where and collector go, in that order.
QUARANTINE_COLUMNS = (
    Column("id", lambda e: e["id"], whole=True),
    Column("collector", lambda e: e["collector"], drop=3),
    Column("where", lambda e: f"{Path(e['source_uri'] or '').name} {e['position']}", drop=2),
    Column("dialect", lambda e: e["dialect"] or "?", drop=1),
    Column("status", lambda e: e["status"]),
    Column("problem", _problem, wraps=True),
)


@quarantine_app.command("list")
def quarantine_list(
    config: ConfigOption = None,
    all_: Annotated[bool, typer.Option("--all", help="Include entries already replayed.")] = False,
    format: FormatOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="--format json: one JSON line per entry, with the raw text.")] = False,
) -> None:
    """Show quarantined reports and why they were rejected. The table fits the width (80
    columns when not a terminal); --format tsv, csv or json give every field, the raw text
    included."""
    import orjson

    from ..ingest import quarantine_entries

    shape = chosen_format(format, as_json)
    cfg = load_config(config)
    with open_warehouse(cfg) as warehouse:
        frame = quarantine_entries(warehouse, include_replayed=all_)
    rows = [{**e, "problems": orjson.loads(e["problems"])} for e in frame.iter_rows(named=True)]
    emit(rows, frame.columns, QUARANTINE_COLUMNS, shape, title=f"{len(rows)} quarantined")


@quarantine_app.command("replay")
def quarantine_replay(
    ids: Annotated[list[str] | None, typer.Argument(help="Entries to replay (default: every open entry).")] = None,
    config: ConfigOption = None,
) -> None:
    """Run quarantined reports through validation again and store the ones that now pass."""
    from ..ingest import replay

    cfg = load_config(config)
    with open_warehouse(cfg) as warehouse:
        try:
            result = replay(cfg, warehouse, ids or None)
        except KeyError as exc:
            raise Refused(exc.args[0]) from None
    out.print(
        f"replayed {len(result.replayed)} · still invalid {len(result.still_invalid)} · "
        f"records stored {result.counts.new}",
        highlight=False,
    )
