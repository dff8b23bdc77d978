"""The record commands: ``records show`` (one stored record, as the warehouse holds it now) and
``forget`` (erase records everywhere)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from ._app import (
    ByOption,
    ConfigOption,
    Refused,
    UserError,
    actor,
    app,
    err,
    example,
    load_config,
    open_warehouse,
    out,
    warehouse_turn,
)
from ._tables import cell, fields_text

records_app = typer.Typer(
    no_args_is_help=True,
    help="Stored records: canonical fields, current status, cluster.",
    epilog=example("records show fb_01M454FQ9D76WV3X9GE6K4TWZ5", "records show sample:fb_01M454FQ9D76WV3X9GE6K4TWZ5 --json"),
)
app.add_typer(records_app, name="records")


@records_app.command("show")
def records_show(
    record: Annotated[str, typer.Argument(help="A record id, or collector:id.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per record.")] = False,
    config: ConfigOption = None,
) -> None:
    """One stored record: its canonical fields, current status and history, signals and clusters."""
    import orjson

    from ..clusters import find_records

    cfg = load_config(config)
    with open_warehouse(cfg) as warehouse:
        found = find_records(warehouse, record)
    if not found:
        raise Refused(f"no such record: {_shown(record)}")
    for item in found:
        if as_json:
            out.file.write(orjson.dumps(item, default=str).decode() + "\n")
            continue
        clusters = ", ".join(f"{view} {c['cluster_id'] or '—'}" + (f" ({c['label']})" if c["label"] else "")
                             for view, c in item["clusters"].items()) or "not clustered yet"
        # Report text is hostile: one printable line per field (rich passes escape sequences on).
        out.print(f"[bold]{escape(cell(item['collector']))}:{escape(cell(item['id']))}[/]  {item['dialect']} · "
                  f"status {item['status'] or '—'} · {escape(cell(clusters))}", highlight=False)
        for name, value in item.items():
            if name not in ("clusters", "history", "signals") and value is not None:
                out.print(f"  {name}: {fields_text(value, seconds=True)}", highlight=False, markup=False)
        for name, value in (item["signals"] or {}).items():
            out.print(f"  signals.{name}: {fields_text(value)}", highlight=False, markup=False)
        for change in item["history"]:
            out.print(f"  status {change['status']} seen {change['seen_at']:%Y-%m-%d %H:%M}"
                      + (f" ({escape(change['issue_url'])})" if change["issue_url"] else ""), highlight=False)


@app.command()
def forget(
    reason: Annotated[str, typer.Option("--reason", help="Why (kept in the audit; never the content).")],
    record: Annotated[str | None, typer.Option("--record", help="A record id, as stored or as its source sent it.")] = None,
    collector: Annotated[str | None, typer.Option("--collector", help="The collector (source) of --record; needed "
                                                  "only when more than one holds that id.")] = None,
    account: Annotated[str | None, typer.Option("--account", help="An account as a source sends it, or its acct_… pseudonym.")] = None,
    by: ByOption = None,
    config: ConfigOption = None,
) -> None:
    """Erase a record, or every record of an account, from every table, the collectors that
    sent them and the warehouse file's bytes, for good (no source stores them again); redraft
    the drafts that quoted them and, when GitHub is configured, rewrite the filed issues and
    comments that still quote them."""
    from ..digest import many, rewrite_digests
    from ..publish import AmbiguousRecord, IssueTracker, records_to_forget
    from ..publish import forget as forget_records

    if (record is None) == (account is None):
        raise UserError("give exactly one of --record and --account")
    if collector is not None and record is None:
        raise UserError("--collector goes with --record")
    cfg = load_config(config)
    publishing = bool(cfg.github.repos or cfg.github.default_repo)
    tracker = IssueTracker(cfg.github, cfg.github.token()) if publishing else None
    try:
        with open_warehouse(cfg) as warehouse:
            try:
                target = records_to_forget(cfg, warehouse, record=record, account=account, collector=collector)
            except AmbiguousRecord as exc:
                raise UserError(f"record {_shown(exc.record)} is held by collectors {', '.join(map(_shown, exc.holders))}: "
                                "name one with --collector") from None
            if not target:
                where = f" from collector {_shown(collector)}" if collector else ""
                raise Refused(f"no such record{where}: {_shown(record)}" if record else "no records of that account")
            run = forget_records(cfg, warehouse, target, actor(by), reason, tracker)
    finally:
        if tracker is not None:
            tracker.close()
    with warehouse_turn(cfg):  # a digest quotes reports: those on disk are written again without them
        digests = rewrite_digests(cfg)
    out.print(f"[bold]forget[/]: {run.line()}" + (f", wrote {many(len(digests), 'digest file')} again" if digests else ""),
              highlight=False)
    for line in run.bodies.to_check:
        err.print(f"[yellow]check by hand[/] {escape(line)}", highlight=False)
    for line in run.bodies.errors + run.collector_errors:
        err.print(f"[red]error[/]: {escape(line)}", highlight=False)
    if not publishing:
        err.print("filed issues are rewritten by the next publish run (no GitHub repository configured here)",
                  highlight=False)


def _shown(value: str, limit: int = 200) -> str:
    """An id as typed, on one line and bounded: an error is one line, whatever was pasted."""
    shown = value if value.isprintable() else repr(value)
    return shown if len(shown) <= limit else shown[:limit] + "…"
