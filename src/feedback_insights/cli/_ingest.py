"""The ingesting commands: ``ingest``, ``signals`` and ``quarantine …``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from ._app import ConfigOption, UserError, app, err, example, load_config, open_warehouse, out

if TYPE_CHECKING:
    from ..config import Config

quarantine_app = typer.Typer(
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
        err.print(f"[red]error[/] {escape(error)}", highlight=False)
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


@quarantine_app.command("list")
def quarantine_list(
    config: ConfigOption = None,
    all_: Annotated[bool, typer.Option("--all", help="Include entries already replayed.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON line per entry, with the raw text.")] = False,
) -> None:
    """Show quarantined reports and why they were rejected."""
    import orjson
    from rich.table import Table

    from ..ingest import quarantine_entries

    cfg = load_config(config)
    with open_warehouse(cfg) as warehouse:
        entries = quarantine_entries(warehouse, include_replayed=all_).to_dicts()
    if as_json:
        for e in entries:
            e["problems"] = orjson.loads(e["problems"])
            sys.stdout.write(orjson.dumps(e, default=str).decode() + "\n")
        return
    table = Table(title=f"{len(entries)} quarantined")
    table.add_column("id", no_wrap=True)
    for name in ("collector", "where", "dialect", "status"):
        table.add_column(name)
    table.add_column("problem", overflow="fold")
    for e in entries:
        problems = orjson.loads(e["problems"])
        first = problems[0] if problems else {"path": "", "message": ""}
        more = f" (+{len(problems) - 1})" if len(problems) > 1 else ""
        where = f"{Path(e['source_uri'] or '').name} {e['position']}"
        label = f"{first['path']}: {first['message']}" if first["path"] else first["message"]
        table.add_row(*(escape(cell) for cell in (e["id"], e["collector"], where, e["dialect"] or "?", e["status"], label + more)))
    out.print(table, soft_wrap=False)  # a table lays itself out in the width


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
            raise UserError(exc.args[0]) from None
    out.print(
        f"replayed {len(result.replayed)} · still invalid {len(result.still_invalid)} · "
        f"records stored {result.counts.new}",
        highlight=False,
    )
