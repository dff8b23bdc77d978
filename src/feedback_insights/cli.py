"""The ``feedback-insights`` command: a thin shell over the library.

Heavy modules (DuckDB, Polars, later the embedding model) are imported inside the commands
that need them, so ``--help`` stays instant. Errors are one line; ``--debug`` shows the trace.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

app = typer.Typer(
    help="Turn feedback filed by AI agents into clustered demand, drafted issues and known_issue updates.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
quarantine_app = typer.Typer(help="Reports that failed validation, kept whole until a replay stores them.")
app.add_typer(quarantine_app, name="quarantine")
collector_app = typer.Typer(help="The collector server agents and services send feedback to.")
app.add_typer(collector_app, name="collector")
warehouse_app = typer.Typer(help="The DuckDB warehouse as Parquet files, for shared storage or another machine.")
app.add_typer(warehouse_app, name="warehouse")

err = Console(stderr=True, soft_wrap=True)
out = Console()

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML configuration (default: $FEEDBACK_INSIGHTS_CONFIG, ./feedback-insights.toml, or the embedded sample)."),
]
DialectOption = Annotated[
    str, typer.Option("--dialect", "-d", help="auto | afp | afs | session | rfc026", show_default=True)
]


class UserError(Exception):
    """A failure the user can fix; printed as one line."""


@app.callback()
def _root(debug: Annotated[bool, typer.Option("--debug", help="Show stack traces on errors.")] = False) -> None:
    """Declares the global options. ``--debug`` is acted on by :func:`main`, which must know it
    before any command runs (to decide whether a failure prints one line or the trace)."""


def _check_dialect(dialect: str) -> str:
    from .dialects import CHOICES

    if dialect not in CHOICES:
        raise UserError(f"--dialect must be one of: {', '.join(CHOICES)} (got {dialect!r})")
    return dialect


def _config(path: Path | None):  # -> Config, imported lazily
    from .config import load

    return load(path)


def in_warehouse(cfg, action, *refusals: type[Exception]):
    """``action(warehouse)`` on the configured warehouse; a refusal (an error the user can fix,
    e.g. an unknown id) becomes one line."""
    from .warehouse import Warehouse

    with Warehouse(cfg.warehouse.path) as warehouse:
        try:
            return action(warehouse)
        except refusals as exc:
            raise UserError(str(exc)) from None


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="JSON Lines, JSON or Parquet files; - for standard input.")],
    dialect: DialectOption = "auto",
    max_bytes: Annotated[int, typer.Option(help="Body size limit in bytes.")] = 16_384,
) -> None:
    """Check every record; print one JSON line each. Exit 1 if any is invalid."""
    import orjson

    from .processing import check

    choice = _check_dialect(dialect)
    index, invalid = 0, 0
    for path in files:
        for item in _items(path):
            verdict = check(item, choice, max_bytes)
            line = {
                "index": index,
                "dialect": verdict.dialect,
                "valid": not verdict.problems,
                "errors": [p.as_dict() for p in verdict.problems],
            }
            sys.stdout.write(orjson.dumps(line).decode() + "\n")
            invalid += bool(verdict.problems)
            index += 1
    if invalid:
        raise typer.Exit(1)


def _items(path: Path):  # -> Iterator[RawItem]
    from .readers import read_items

    if str(path) != "-" and not path.is_file():
        raise UserError(f"{path}: no such file")
    return read_items(path)


@app.command()
def normalise(
    input: Annotated[Path, typer.Option("--input", "-i", help="File to read; - for standard input.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="JSON Lines file to write; - for standard output.")],
    dialect: DialectOption = "auto",
    collector: Annotated[str, typer.Option(help="Collector name the records carry.")] = "cli",
    service: Annotated[str | None, typer.Option(help="Service for dialects that name none.")] = None,
) -> None:
    """Write canonical records as JSON Lines; invalid input is reported on stderr (exit 1)."""
    import orjson

    from .processing import process
    from .warehouse import now_utc

    processed = process(
        _items(input),
        collector=collector,
        source_uri=str(input),
        received_at=now_utc().isoformat(),
        choice=_check_dialect(dialect),
        service=service,
    )
    lines = b"".join(orjson.dumps(r, default=str) + b"\n" for r in processed.records)
    if str(output) == "-":
        sys.stdout.buffer.write(lines)
    else:
        output.write_bytes(lines)
    for q in processed.quarantined:
        err.print(f"[red]invalid[/] {escape(str(input))} {escape(q.position)}: " + escape("; ".join(map(str, q.problems))), highlight=False)
    if str(output) != "-":
        err.print(f"{len(processed.records)} records → {output}; {len(processed.quarantined)} invalid")
    if processed.quarantined:
        raise typer.Exit(1)


@app.command()
def scrub(
    input: Annotated[Path, typer.Option("--input", "-i", help="JSON Lines, one object per line; - for standard input.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="JSON Lines file to write; - for standard output.")],
) -> None:
    """Redact secrets and personal data from every string in every object, keys and structure
    kept; each output line gains "_redactions": {type: count}. Bad lines: stderr, exit 1."""
    import orjson

    from .scrub import scrub_json

    lines, bad = [], 0
    for item in _items(input):
        item.parse()
        if not isinstance(item.obj, dict):
            problem = item.parse_error or "must be a JSON object"
            err.print(f"[red]invalid[/] {escape(str(input))} {escape(item.position)}: {escape(problem)}", highlight=False)
            bad += 1
            continue
        scrubbed, counts = scrub_json(item.obj)
        lines.append(orjson.dumps({**scrubbed, "_redactions": counts}) + b"\n")
    data = b"".join(lines)
    if str(output) == "-":
        sys.stdout.buffer.write(data)
    else:
        output.write_bytes(data)
    if bad:
        raise typer.Exit(1)


def _ingest_with_progress(config) -> None:
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

    from .ingest import ingest
    from .warehouse import Warehouse

    with Warehouse(config.warehouse.path) as warehouse, Progress(
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


def _score_with_progress(config) -> None:
    from rich.progress import Progress, SpinnerColumn, TextColumn

    from .scoring import score_new_records
    from .warehouse import Warehouse

    with Warehouse(config.warehouse.path) as warehouse, Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed} records"),
        console=err, transient=True,
    ) as progress:
        task = progress.add_task("signals", total=None)
        scored = score_new_records(warehouse, on_batch=lambda n: progress.advance(task, n))
    out.print(f"[bold]signals[/]: scored {scored} new records", highlight=False)


@app.command()
def ingest(config: ConfigOption = None) -> None:
    """Pull every configured source into the warehouse (scrubbed, accounts pseudonymised)."""
    _ingest_with_progress(_config(config))


@app.command()
def signals(config: ConfigOption = None) -> None:
    """Compute RFC-026 signals (sentiment, specificity, topics, expectation gap, severity
    language) for every stored record that has none yet."""
    _score_with_progress(_config(config))


@quarantine_app.command("list")
def quarantine_list(
    config: ConfigOption = None,
    all_: Annotated[bool, typer.Option("--all", help="Include entries already replayed.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON line per entry, with the raw text.")] = False,
) -> None:
    """Show quarantined reports and why they were rejected."""
    import orjson
    from rich.table import Table

    from .warehouse import Warehouse

    cfg = _config(config)
    with Warehouse(cfg.warehouse.path) as warehouse:
        entries = warehouse.quarantine(include_replayed=all_).to_dicts()
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
    out.print(table)


@quarantine_app.command("replay")
def quarantine_replay(
    ids: Annotated[list[str] | None, typer.Argument(help="Entries to replay (default: every open entry).")] = None,
    config: ConfigOption = None,
) -> None:
    """Run quarantined reports through validation again and store the ones that now pass."""
    from .quarantine import replay
    from .warehouse import Warehouse

    cfg = _config(config)
    with Warehouse(cfg.warehouse.path) as warehouse:
        try:
            result = replay(cfg, warehouse, ids or None)
        except KeyError as exc:
            raise UserError(exc.args[0]) from None
    out.print(
        f"replayed {len(result.replayed)} · still invalid {len(result.still_invalid)} · "
        f"records stored {result.counts.new}",
        highlight=False,
    )


@collector_app.command("serve")
def collector_serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8787,
    db: Annotated[Path | None, typer.Option(help="SQLite file (default: [collector] db).")] = None,
    config: ConfigOption = None,
) -> None:
    """Serve the collector API (OpenAPI at /docs and /openapi.json)."""
    import logging

    import uvicorn

    from .collector.app import Collector, create_app
    from .collector.store import Store
    from .config import ENV_HMAC_KEY, embedded_default
    from .pseudonymise import Pseudonymiser

    cfg = _config(config)
    if cfg == embedded_default() and not os.environ.get(ENV_HMAC_KEY):
        # The sample's key is published: real customers' accounts need a key of their own.
        raise UserError(f"the collector pseudonymises real accounts: set {ENV_HMAC_KEY} (or give a --config)")
    settings = cfg.collector if db is None else cfg.collector.model_copy(update={"db": db})
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    collector = Collector(settings, Pseudonymiser(cfg.privacy.key()), Store(settings.db))
    out.print(f"collector on http://{host}:{port}  ·  store {settings.db}  ·  auth {settings.auth}", highlight=False)
    uvicorn.run(create_app(collector), host=host, port=port, log_level="warning", access_log=False)


@collector_app.command("hash-key")
def collector_hash_key(key: Annotated[str, typer.Argument(help="The key to write in the configuration.")]) -> None:
    """Print how a key is written in [collector] (keys are stored hashed)."""
    from .collector.app import hash_key

    out.print(hash_key(key), highlight=False)


@warehouse_app.command("export")
def warehouse_export(
    folder: Annotated[Path, typer.Argument(help="A new (or empty) folder.")], config: ConfigOption = None
) -> None:
    """Write every table of the warehouse as Parquet, with its schema and sequences."""
    from .warehouse import export_parquet

    cfg = _config(config)
    export_parquet(cfg.warehouse.path, folder)
    out.print(f"exported {cfg.warehouse.path} → {folder}", highlight=False)


@warehouse_app.command("import")
def warehouse_import(
    folder: Annotated[Path, typer.Argument(help="A folder written by warehouse export.")], config: ConfigOption = None
) -> None:
    """Create the configured warehouse file from an exported folder."""
    from .warehouse import import_parquet

    cfg = _config(config)
    import_parquet(folder, cfg.warehouse.path)
    out.print(f"imported {folder} → {cfg.warehouse.path}", highlight=False)


# Registered last: these modules add their commands to ``app``.
from . import cluster_commands, digest_commands, draft_commands, flow_commands  # noqa: F401


def main() -> None:
    """Console entry point: typer reports usage errors itself; ours become one line."""
    try:
        app()
    except Exception as exc:
        if "--debug" in sys.argv[1:]:
            raise
        from .config import ConfigError

        known = (UserError, ConfigError, FileNotFoundError, FileExistsError, PermissionError)
        message = str(exc) if isinstance(exc, known) else f"{type(exc).__name__}: {exc}"
        err.print(f"[red]error[/]: {escape(message)}", highlight=False)
        sys.exit(2)
