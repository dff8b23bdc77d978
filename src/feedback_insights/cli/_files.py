"""The stateless file commands: ``validate``, ``normalise`` and ``scrub``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from ._app import ConfigOption, UserError, app, err, load_config

if TYPE_CHECKING:
    from ..ingest import RawItem

DialectOption = Annotated[
    str, typer.Option("--dialect", "-d", help="auto | afp | afs | session | rfc026", show_default=True)
]


def _check_dialect(dialect: str) -> str:
    from ..ingest import dialects

    choices = dialects.choices()
    if dialect not in choices:
        raise UserError(f"--dialect must be one of: {', '.join(choices)} (got {dialect!r})")
    return dialect


def _items(path: Path) -> Iterator[RawItem]:
    from ..ingest import read_items

    if str(path) != "-" and not path.is_file():
        raise UserError(f"{path}: no such file")
    return read_items(path)


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="JSON Lines, JSON or Parquet files; - for standard input.")],
    dialect: DialectOption = "auto",
    max_bytes: Annotated[int | None, typer.Option(help="Body size limit in bytes (default: the AFP limit).")] = None,
) -> None:
    """Check every record; print one JSON line each. Exit 1 if any is invalid."""
    import orjson

    from ..core import DEFAULT_MAX_BYTES
    from ..ingest import check

    choice = _check_dialect(dialect)
    limit = max_bytes or DEFAULT_MAX_BYTES
    index, invalid = 0, 0
    for path in files:
        for item in _items(path):
            verdict = check(item, choice, limit)
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

    from ..core import now_utc
    from ..ingest import process

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
        err.print(f"[red]error[/]: {escape(str(input))} {escape(q.position)}: " + escape("; ".join(map(str, q.problems))), highlight=False)
    if str(output) != "-":
        err.print(f"{len(processed.records)} records → {output}; {len(processed.quarantined)} invalid")
    if processed.quarantined:
        raise typer.Exit(1)


@app.command()
def scrub(
    input: Annotated[Path, typer.Option("--input", "-i", help="JSON Lines, one object per line; - for standard input.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="JSON Lines file to write; - for standard output.")],
    config: ConfigOption = None,
) -> None:
    """Redact secrets and personal data from every string in every object, keys and structure
    kept; each output line gains "_redactions": {type: count}. Ids are kept, and accounts and
    ids that carry a secret or an email are pseudonymised with the configured key, as ingest
    does: the output still joins its input. Bad lines: stderr, exit 1."""
    import orjson

    from ..privacy import Pseudonymiser, scrub_json

    pseudonymise = Pseudonymiser(load_config(config).privacy.key())
    lines, bad = [], 0
    for item in _items(input):
        item.parse()
        if not isinstance(item.obj, dict):
            problem = item.parse_error or "must be a JSON object"
            err.print(f"[red]error[/]: {escape(str(input))} {escape(item.position)}: {escape(problem)}", highlight=False)
            bad += 1
            continue
        scrubbed, counts = scrub_json(item.obj, pseudonymise)
        lines.append(orjson.dumps({**scrubbed, "_redactions": counts}) + b"\n")
    data = b"".join(lines)
    if str(output) == "-":
        sys.stdout.buffer.write(data)
    else:
        output.write_bytes(data)
    if bad:
        raise typer.Exit(1)
