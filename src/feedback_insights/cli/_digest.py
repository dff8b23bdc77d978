"""The ``digest`` command: the weekly digest for product managers, as HTML and Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import ConfigOption, UserError, app, load_config, out


@app.command()
def digest(
    week: Annotated[str | None, typer.Option(help="ISO week, e.g. 2026-W48 (default: the last complete week).")] = None,
    format: Annotated[str | None, typer.Option("--format", help="html | md (default: both).")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder (default: [digest] folder).")] = None,
    source: Annotated[str | None, typer.Option(
        "--source", help="Only reports from agent | runtime | human (or one source value); written as "
                         "digest-<week>-<source>.*, not posted.")] = None,
    config: ConfigOption = None,
) -> None:
    """Write the weekly digest: top problems by distinct accounts, new, rising, regressions,
    fixes, praise, goals, who reported (agents, runtimes, people), services, and links to
    drafted and filed issues."""
    from ..digest import DigestError, write_digest

    if format not in (None, "html", "md"):
        raise UserError(f"--format must be html or md (got {format!r})")
    try:
        paths = write_digest(load_config(config), week, (format,) if format else None, out_dir, source)
    except DigestError as exc:
        raise UserError(str(exc)) from None
    for path in paths:
        out.print(f"digest: {path.resolve()}", highlight=False)
