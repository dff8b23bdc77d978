"""The ``publish`` command: approved drafts to GitHub, state back, and every sink told."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from ._app import ConfigOption, app, err, load_config, out, warehouse_turn


@app.command()
def publish(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be filed; change nothing.")] = False,
    config: ConfigOption = None,
) -> None:
    """File approved drafts on GitHub (exactly once), read issue state back, send known_issue
    updates to collectors and mark filed in-session rows. --dry-run names the repository each
    approved draft would be filed on, and what the run would skip or refuse (exit 1)."""
    from ..publish import publish_configured

    cfg = load_config(config)
    with warehouse_turn(cfg), err.status("publishing"):
        run = publish_configured(cfg, dry_run=dry_run)
    for item in run.would_file:
        labels = escape(f"[labels: {', '.join(item['labels'])}]")
        out.print(f"[bold]would file[/] draft {item['draft']} on {item['repo']}: {escape(item['title'])}  {labels}",
                  highlight=False)
    for draft_id, url in run.filed:
        out.print(f"filed draft {draft_id}: {url}", highlight=False)
    for line in run.skipped:
        err.print(f"[yellow]skipped[/] {escape(line)}", highlight=False)
    out.print(f"[bold]publish[/]: {run.line()}", highlight=False)
    for error in run.errors:
        err.print(f"[red]error[/]: {escape(error)}", highlight=False)
    if run.errors:
        raise typer.Exit(1)
