"""The ``digest`` command: the weekly digest for product managers, as HTML and Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .cli import ConfigOption, UserError, _config, app, out


def write_digest(cfg, week: str | None = None, kinds: tuple[str, ...] | None = None, folder: Path | None = None) -> list[Path]:
    """Build and write one week's digest (default: the last complete week); POST the Markdown
    to the configured webhook. Returns the files written."""
    from .digest import Week, build
    from .digest_render import FORMATS, post, render, write
    from .warehouse import Warehouse, now_utc

    try:
        chosen = Week.parse(week) if week else Week.before(now_utc())
    except ValueError as exc:
        raise UserError(str(exc)) from None
    with Warehouse(cfg.warehouse.path) as warehouse:
        digest = build(warehouse, chosen, cfg.demand.half_life_days)
    paths = write(digest, folder or cfg.digest.folder, kinds or FORMATS)
    webhook = cfg.digest.webhook()
    if webhook:
        post(render(digest, "md"), webhook)
    return paths


@app.command()
def digest(
    week: Annotated[str | None, typer.Option(help="ISO week, e.g. 2026-W48 (default: the last complete week).")] = None,
    format: Annotated[str | None, typer.Option("--format", help="html | md (default: both).")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder (default: [digest] folder).")] = None,
    config: ConfigOption = None,
) -> None:
    """Write the weekly digest: top problems by distinct accounts, new, rising, regressions,
    fixes, praise, goals, services, and links to drafted and filed issues."""
    if format not in (None, "html", "md"):
        raise UserError(f"--format must be html or md (got {format!r})")
    for path in write_digest(_config(config), week, (format,) if format else None, out_dir):
        out.print(f"digest: {path.resolve()}", highlight=False)
