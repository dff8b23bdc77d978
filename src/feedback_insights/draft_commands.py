"""The drafting and publishing commands: ``draft``, ``drafts …``, ``draft-preview``, ``publish``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from .cli import ConfigOption, UserError, _config, app, err, in_warehouse, out
from .cluster_commands import ByOption, _actor

drafts_app = typer.Typer(help="Drafted issues: review them before they are filed.")
app.add_typer(drafts_app, name="drafts")

DraftId = Annotated[int, typer.Argument(help="The draft (feedback-insights drafts list).")]


def _chat_client(cfg):  # -> ChatClient | None
    from .llm import ChatClient

    return ChatClient(cfg.llm) if cfg.llm else None


def draft_with_progress(cfg) -> None:
    """The pipeline stage: draft or redraft the clusters that crossed the threshold."""
    from .drafts import draft_clusters
    from .warehouse import Warehouse

    client = _chat_client(cfg)
    try:
        with Warehouse(cfg.warehouse.path) as warehouse, err.status("drafting issues") as status:
            run = draft_clusters(cfg, warehouse, client, on_draft=lambda c: status.update(f"drafted cluster {c}"))
    finally:
        if client:
            client.close()
    out.print(f"[bold]drafts[/]: {run.line()}", highlight=False)


@app.command()
def draft(config: ConfigOption = None) -> None:
    """Draft an issue for every cluster that crossed the demand threshold (LLM-assisted when
    [llm] is configured), and refresh pending drafts of clusters that grew."""
    draft_with_progress(_config(config))


def _review(action, cfg):
    from .review import ReviewError

    return in_warehouse(cfg, action, ReviewError)


@drafts_app.command("list")
def drafts_list(
    status: Annotated[str | None, typer.Option(help="pending | approved | rejected | filed")] = None,
    config: ConfigOption = None,
) -> None:
    """Drafts, pending ones first, by distinct accounts."""
    from rich.table import Table

    from .review import list_drafts

    rows = _review(lambda w: list_drafts(w, status).to_dicts(), _config(config))
    table = Table(title=f"{len(rows)} drafts")
    for name, justify in (("id", "right"), ("status", "left"), ("accounts", "right"), ("reports", "right")):
        table.add_column(name, justify=justify, no_wrap=True)
    table.add_column("title / issue", overflow="fold", ratio=1)
    for r in rows:
        status_text = r["status"] + (f" ({r['known_status']})" if r["known_status"] else "") + (" · edited" if r["edited"] else "")
        title = r["title"] + (f"\n{r['issue_url']}" if r["issue_url"] else "") + (" (LLM)" if r["drafted_by"] == "llm" else "")
        table.add_row(*(escape(str(c)) for c in (r["id"], status_text, r["accounts"], r["reports"], title)))
    out.print(table)


@drafts_app.command("show")
def drafts_show(draft_id: DraftId, config: ConfigOption = None) -> None:
    """A draft's title, labels, workaround and body as it will be filed, then its history."""
    from .review import get_draft, history

    draft, actions = _review(lambda w: (get_draft(w, draft_id), history(w, draft_id)), _config(config))
    out.print(f"[bold]{escape(draft['title'])}[/]", highlight=False)
    out.print(f"status {draft['status']} · labels {', '.join(draft['labels'])} · drafted by {draft['drafted_by']}"
              + (f" · LLM fallback: {escape(draft['llm_error'])}" if draft["llm_error"] else ""), highlight=False)
    out.print(f"workaround: {escape(draft['workaround'] or '(none; drafts edit sets one)')}", highlight=False)
    if draft["issue_url"]:
        out.print(f"issue: {draft['issue_url']} ({draft['known_status']})", highlight=False)
    out.rule()
    out.print(escape(draft["body"]), highlight=False, markup=False)
    out.rule()
    for a in actions:
        out.print(f"{a['acted_at']:%Y-%m-%d %H:%M} {a['action']} by {escape(a['actor'])} {escape(a['detail'] or '')}", highlight=False)


@drafts_app.command("approve")
def drafts_approve(draft_id: DraftId, by: ByOption = None, config: ConfigOption = None) -> None:
    """Approve a draft: the next publish files it."""
    from .review import approve

    _review(lambda w: approve(w, draft_id, _actor(by)), _config(config))
    out.print(f"approved draft {draft_id}; feedback-insights publish files it")


@drafts_app.command("reject")
def drafts_reject(
    draft_id: DraftId,
    reason: Annotated[str, typer.Option("--reason", help="Why (kept with the decision).")],
    by: ByOption = None,
    config: ConfigOption = None,
) -> None:
    """Reject a draft; its cluster gets no other draft."""
    from .review import reject

    _review(lambda w: reject(w, draft_id, _actor(by), reason), _config(config))
    out.print(f"rejected draft {draft_id}")


@drafts_app.command("edit")
def drafts_edit(draft_id: DraftId, by: ByOption = None, config: ConfigOption = None) -> None:
    """Edit title, labels, workaround (what collectors tell agents) and body in $EDITOR."""
    from .review import edit_form, get_draft, save_edit

    cfg = _config(config)
    draft = _review(lambda w: get_draft(w, draft_id), cfg)
    edited = _in_editor(edit_form(draft))
    if edited is None:
        out.print("no change")
        return
    changed = _review(lambda w: save_edit(w, draft_id, _actor(by), edited), cfg)
    out.print(f"draft {draft_id}: changed {', '.join(changed)}" if changed else "no change")


def _in_editor(text: str) -> str | None:
    """``text`` edited in ``$VISUAL`` / ``$EDITOR`` (default vi); None when left unchanged."""
    import os
    import shlex
    import subprocess
    import tempfile

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "draft.md"
        path.write_text(text, encoding="utf-8")
        try:
            done = subprocess.run([*shlex.split(editor), str(path)], check=False)
        except FileNotFoundError:
            raise UserError(f"editor {editor!r} not found: set $EDITOR") from None
        if done.returncode != 0:
            raise UserError(f"editor {editor!r} exited with {done.returncode}; nothing saved")
        edited = path.read_text(encoding="utf-8")
    return None if edited == text else edited


@app.command("draft-preview")
def draft_preview(
    input: Annotated[Path, typer.Option("--input", "-i", exists=True, dir_okay=False, help="JSONL records, treated as one cluster.")],
    prompt: Annotated[bool, typer.Option("--prompt", help="Also print the messages an LLM would be sent.")] = False,
    llm: Annotated[bool, typer.Option("--llm", help="Draft with the configured [llm] endpoint (calls it).")] = False,
    config: ConfigOption = None,
) -> None:
    """Print the issue the pipeline would draft for these records, as JSON {title, body, labels}."""
    import orjson

    from .config import DEFAULT_PROMPT_TOKENS
    from .drafting import llm_draft, prompt_messages, template_draft
    from .preview import PreviewError, preview_input, read_records
    from .warehouse import Warehouse

    cfg = _config(config)
    if llm and cfg.llm is None:
        raise UserError("--llm needs an [llm] section in the configuration")
    try:
        records = read_records(input, cfg)
    except PreviewError as exc:
        raise UserError(str(exc)) from None
    with Warehouse(":memory:") as warehouse:
        inputs = preview_input(records, warehouse)
    if llm:
        with _chat_client(cfg) as client:
            result = llm_draft(inputs, cfg.drafts, client)
        if result.llm_error:
            err.print(f"[yellow]LLM draft not used[/]: {escape(result.llm_error)}", highlight=False)
    else:
        result = template_draft(inputs, cfg.drafts)
    shown = result.as_json()
    if prompt:
        budget = cfg.llm.max_prompt_tokens if cfg.llm else DEFAULT_PROMPT_TOKENS
        shown["messages"] = prompt_messages(inputs, cfg.drafts, budget)
    sys.stdout.write(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode() + "\n")


@app.command()
def publish(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be filed; change nothing.")] = False,
    config: ConfigOption = None,
) -> None:
    """File approved drafts on GitHub (exactly once), read issue state back, send known_issue
    updates to collectors and mark filed in-session rows."""
    from .publish import publish_configured

    with err.status("publishing"):
        run = publish_configured(_config(config), dry_run=dry_run)
    for item in run.would_file:
        out.print(f"[bold]would file[/] draft {item['draft']} on {item['repo'] or '(no repository mapped)'}: "
                  f"{escape(item['title'])}  [labels: {escape(', '.join(item['labels']))}]", highlight=False)
    for draft_id, url in run.filed:
        out.print(f"filed draft {draft_id}: {url}", highlight=False)
    for line in run.skipped:
        err.print(f"[yellow]skipped[/] {escape(line)}", highlight=False)
    out.print(f"[bold]publish[/]: {run.line()}", highlight=False)
    for error in run.errors:
        err.print(f"[red]error[/] {escape(error)}", highlight=False)
    if run.errors:
        raise typer.Exit(1)
