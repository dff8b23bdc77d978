"""The ``digest`` command: the weekly digest for product managers, written as HTML and Markdown
and sent where ``[digest]`` says (a chat webhook, an email)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import ConfigOption, UserError, app, err, example, load_config, out, warehouse_turn


@app.command(epilog=example("digest", "digest --week 2026-W48 --format md --no-send", "digest --source human"))
def digest(
    week: Annotated[str | None, typer.Option(help="ISO week, e.g. 2026-W48 (default: the last complete week).")] = None,
    format: Annotated[str | None, typer.Option("--format", help="html | md (default: both).")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder (default: [digest] folder).")] = None,
    source: Annotated[str | None, typer.Option(
        "--source", help="Only reports from agent | runtime | human (or one source value); written as "
                         "digest-<week>-<source>.*, not sent.")] = None,
    send: Annotated[bool, typer.Option(
        "--send/--no-send", help="Post to [digest] webhook_env and mail to [digest.email] when configured.")] = True,
    resend: Annotated[bool, typer.Option(
        "--resend", help="Send to the channels that already had this week's same digest too.")] = False,
    config: ConfigOption = None,
) -> None:
    """Write the weekly digest (each problem once, with its accounts this week and last, its
    reports and blocking reports of the same weeks, and where its issue stands), then send it:
    the chat webhook gets Slack mrkdwn or Markdown ([digest] webhook_format), [digest.email]'s
    recipients a multipart email. Each channel gets a week's same digest once: run again after
    one failed, only that one is sent (--resend sends to all)."""
    from ..digest import DigestError, many, send_digest, write_digest

    if format not in (None, "html", "md"):
        raise UserError(f"--format must be html or md (got {format!r})")
    cfg = load_config(config)
    try:
        with warehouse_turn(cfg):  # built and written on the warehouse's turn; sent off it
            done = write_digest(cfg, week, (format,) if format else None, out_dir, source, send)
        for path in done.paths:
            out.print(f"digest: {path.resolve()}", highlight=False)
        sent = send_digest(cfg, done.digest, lambda: warehouse_turn(cfg), resend) if send else None
    except DigestError as exc:
        raise UserError(str(exc)) from None
    for where in sent.skipped if sent else ():
        out.print(f"already sent: {where} (this week's same digest; --resend sends it again)", highlight=False)
    for where in sent.sent if sent else ():
        out.print(f"sent: {where}", highlight=False)
    if done.current_week_reports:
        err.print(f"{done.week} had no reports: the digest covers the last complete week, and the "
                  f"{many(done.current_week_reports, 'report')} so far are from this week, {done.current_week}. "
                  f"For this week's digest so far: feedback-insights digest --week {done.current_week}", highlight=False)
