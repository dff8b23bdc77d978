"""The drafting commands: ``draft``, ``drafts …`` (review) and ``draft-preview``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

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
    in_warehouse,
    load_config,
    open_warehouse,
    out,
)
from ._tables import Column, FormatOption, chosen_format, emit

if TYPE_CHECKING:
    from ..config import Config
    from ..drafts import ChatClient
    from ..warehouse import Warehouse

drafts_app = typer.Typer(
    no_args_is_help=True,
    help="Drafted issues: review them before they are filed.",
    epilog=example("drafts list --status pending", "drafts show 3", "drafts approve 3 --by maria"),
)
app.add_typer(drafts_app, name="drafts")

DraftId = Annotated[int, typer.Argument(help="The draft (feedback-insights drafts list).")]
T = TypeVar("T")


def _chat_client(cfg: Config) -> ChatClient | None:
    from ..drafts import ChatClient

    return ChatClient(cfg.llm) if cfg.llm else None


def draft_with_progress(cfg: Config) -> None:
    """The pipeline stage: draft or redraft the clusters that crossed the threshold."""
    from ..drafts import draft_clusters

    client = _chat_client(cfg)
    try:
        with open_warehouse(cfg) as warehouse, err.status("drafting issues") as status:
            run = draft_clusters(cfg, warehouse, client, on_draft=lambda c: status.update(f"drafted cluster {c}"))
    finally:
        if client:
            client.close()
    out.print(f"[bold]drafts[/]: {run.line()}", highlight=False)


@app.command()
def draft(config: ConfigOption = None) -> None:
    """Draft an issue for every cluster that crossed the demand threshold (LLM-assisted when
    [llm] is configured), and refresh pending drafts of clusters that grew."""
    draft_with_progress(load_config(config))


def _review(action: Callable[[Warehouse], T], cfg: Config) -> T:
    from ..drafts import ReviewError

    return in_warehouse(cfg, action, ReviewError)


def _draft_title(row: Mapping[str, Any]) -> str:
    """The title, with what else a reviewer reads beside it: who drafted it, whether it was
    edited or needs review, and its issue (``owner/repo#12``: a URL would be cut in the width)."""
    notes = (["LLM"] if row["drafted_by"] == "llm" else []) + (["edited"] if row["edited"] else []) + (
        ["needs review"] if row["needs_review"] else [])
    issue = f"{row['repo']}#{row['issue_number']}" if row["repo"] and row["issue_number"] else row["issue_url"]
    return row["title"] + (f" ({', '.join(notes)})" if notes else "") + (f" · {issue}" if issue else "")


#: ``drafts list``'s table; short of room, reports, cluster and this week go, in that order.
DRAFT_COLUMNS = (
    Column("id", lambda r: r["id"], number=True),
    Column("cluster", lambda r: r["cluster_id"], number=True, drop=2),
    Column("accounts", lambda r: r["accounts"], number=True),
    Column("this wk", lambda r: r["accounts_this_week"], number=True, drop=3),
    Column("reports", lambda r: r["reports"], number=True, drop=1),
    Column("status", lambda r: r["status"] + (f" ({r['known_status']})" if r["known_status"] else ""), whole=True),
    Column("title / issue", _draft_title, wraps=True),
)


@drafts_app.command("list")
def drafts_list(
    status: Annotated[str | None, typer.Option(help="pending | approved | rejected | filed | superseded")] = None,
    format: FormatOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="--format json: one JSON line per draft, every field.")] = False,
    config: ConfigOption = None,
) -> None:
    """Drafts, pending ones first, by their cluster's distinct accounts now. The table fits the
    width (80 columns when not a terminal); --format tsv, csv or json give every field."""
    from ..drafts import DRAFT_STATUSES, list_drafts

    shape = chosen_format(format, as_json)
    if status is not None and status not in DRAFT_STATUSES:
        raise UserError(f"--status must be one of: {', '.join(DRAFT_STATUSES)} (got {status!r})")
    cfg = load_config(config)
    frame = _review(lambda w: list_drafts(w, status, cfg.demand.half_life_days), cfg)
    rows = frame.to_dicts()  # its columns are the fields of --json, in their order (README)
    week = next((r["week"] for r in rows if r["week"]), None)
    emit(rows, frame.columns, DRAFT_COLUMNS, shape, title=f"{len(rows)} drafts",
         caption=f"this week: {week}, as of the newest report" if week else None)


@drafts_app.command("create")
def drafts_create(
    cluster_id: Annotated[int, typer.Argument(help="The cluster to draft (feedback-insights clusters list).")],
    by: ByOption = None,
    config: ConfigOption = None,
) -> None:
    """Draft one cluster now, whatever its confidence and demand: how a cluster that needs
    review is drafted once a maintainer has looked at it (the drafting stage leaves it)."""
    from ..drafts import DraftError, draft_cluster

    cfg = load_config(config)
    client = _chat_client(cfg)
    try:
        draft_id = in_warehouse(cfg, lambda w: draft_cluster(cfg, w, cluster_id, actor(by), client), DraftError)
    finally:
        if client:
            client.close()
    out.print(f"drafted cluster {cluster_id} as draft {draft_id}; review it with feedback-insights drafts show {draft_id}")


@drafts_app.command("show")
def drafts_show(
    draft_id: DraftId,
    raw: Annotated[bool, typer.Option("--raw", help="Print the body as the Markdown that is filed, not rendered.")] = False,
    config: ConfigOption = None,
) -> None:
    """A draft's title, labels, workaround and body as it will be filed, then its history. The
    body is rendered as GitHub will show it (its neutralising escapes resolved, nothing in it
    taken for terminal markup or an emoji code); --raw prints its Markdown."""
    from rich.markdown import Markdown

    from ..drafts import get_draft, history
    from ..drafts.neutralise import clean

    draft, actions = _review(lambda w: (get_draft(w, draft_id), history(w, draft_id)), load_config(config))
    out.print(f"[bold]{escape(draft['title'])}[/]", highlight=False)
    out.print(f"status {draft['status']} · labels {escape(', '.join(draft['labels']))} · drafted by {draft['drafted_by']}"
              + (f" · LLM fallback: {escape(draft['llm_error'])}" if draft["llm_error"] else ""), highlight=False)
    out.print(f"workaround: {escape(draft['workaround'] or '(none; drafts edit sets one)')}", highlight=False)
    if draft["issue_url"]:
        out.print(f"issue: {escape(draft['issue_url'])} ({draft['known_status']})", highlight=False)
    out.rule()
    # A maintainer's edit is not neutralised: no control character reaches the terminal either way.
    body = clean(draft["body"])
    if raw:
        out.print(body, highlight=False, markup=False)
    else:  # laid out in the width, quotes and tables included, whatever the output is
        out.print(Markdown(body, hyperlinks=False), soft_wrap=False)
    out.rule()
    for a in actions:
        out.print(f"{a['acted_at']:%Y-%m-%d %H:%M} {a['action']} by {escape(a['actor'])} {escape(a['detail'] or '')}", highlight=False)


@drafts_app.command("approve")
def drafts_approve(draft_id: DraftId, by: ByOption = None, config: ConfigOption = None) -> None:
    """Approve a draft: the next publish files it."""
    from ..drafts import approve

    _review(lambda w: approve(w, draft_id, actor(by)), load_config(config))
    out.print(f"approved draft {draft_id}; feedback-insights publish files it")


@drafts_app.command("reject")
def drafts_reject(
    draft_id: DraftId,
    reason: Annotated[str, typer.Option("--reason", help="Why (kept with the decision).")],
    by: ByOption = None,
    config: ConfigOption = None,
) -> None:
    """Reject a draft; its cluster gets no other draft."""
    from ..drafts import reject

    _review(lambda w: reject(w, draft_id, actor(by), reason), load_config(config))
    out.print(f"rejected draft {draft_id}")


@drafts_app.command("edit")
def drafts_edit(draft_id: DraftId, by: ByOption = None, config: ConfigOption = None) -> None:
    """Edit title, labels, workaround (what collectors tell agents) and body in $EDITOR."""
    from ..drafts import edit_form, get_draft, save_edit

    cfg = load_config(config)
    draft = _review(lambda w: get_draft(w, draft_id), cfg)
    edited = _in_editor(edit_form(draft))
    if edited is None:
        out.print("no change")
        return
    changed = _review(lambda w: save_edit(w, draft_id, actor(by), edited), cfg)
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

    from ..config import DEFAULT_PROMPT_TOKENS
    from ..drafts import PreviewError, llm_draft, preview_input, prompt_messages, read_records, template_draft
    from ..warehouse import Warehouse

    cfg = load_config(config)
    if llm and cfg.llm is None:
        raise UserError("--llm needs an [llm] section in the configuration")
    try:
        records = read_records(input, cfg)
    except PreviewError as exc:
        raise Refused(str(exc)) from None
    with Warehouse(":memory:") as warehouse:
        inputs = preview_input(records, warehouse)
    if llm:
        assert cfg.llm is not None  # checked above
        from ..drafts import ChatClient

        with ChatClient(cfg.llm) as client:
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
