"""The weekly digest rendered: HTML for browsers and email, Markdown for chat and wikis.

Both come from Jinja2 templates in ``templates/``. The HTML environment autoescapes (agents'
words are text); the Markdown one neutralises every value it prints, like issue bodies do.
Every quote is attributed by its record's source, with the words issues use
(:func:`neutralise.attribution`): an owner's complaint is not shown as an agent's.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import jinja2

from ..core import GaveUp, with_retries
from ..drafts import Markdown, neutralise
from ._charts import bars, sparkline, text_sparkline
from ._content import Digest, DigestError

FORMATS = ("html", "md")


def _day(value: datetime | date) -> str:
    return value.strftime("%a %d %b %Y")


def _percent(value: float | None) -> str:
    return f"{(value or 0) * 100:.0f}%"


def _change(now: int, before: int) -> str:
    if not before:
        return ""
    delta = now - before
    return f"({'+' if delta >= 0 else '−'}{abs(delta)} vs last week)"


def _quoted_record(row: dict[str, Any]) -> dict[str, Any]:
    """What attribution reads of the record a row quotes: its ``source``, ``dialect`` and
    ``rating``, given by the content as ``quote_source``, ``quote_dialect`` and
    ``quote_rating``. A row without them is attributed to no one in particular."""
    return {"source": row.get("quote_source"), "dialect": row.get("quote_dialect"), "rating": row.get("quote_rating")}


def _quoted_by(row: dict[str, Any], lower: bool = False) -> str:
    """"An agent reported", "The owner rated it 👎 and wrote" … before a row's quote; ``lower``
    mid-sentence."""
    phrase = neutralise.attribution(_quoted_record(row))
    return phrase[0].lower() + phrase[1:] if lower else phrase


def _goal_of(row: dict[str, Any]) -> str:
    """"An agent's goal", "A user's goal" … before a goal theme's quote."""
    return f"{neutralise.reporter(_quoted_record(row))}'s goal"


def _headline(problem: dict[str, Any]) -> Markdown:
    issue = problem.get("issue")
    text = (issue or {}).get("title") or problem.get("label") or f"cluster {problem['cluster_id']}"
    return Markdown(neutralise.inline(text, 140))


@cache
def _environment(kind: str) -> jinja2.Environment:
    html = kind == "html"
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("feedback_insights.digest", "templates"),
        autoescape=html,
        finalize=None if html else (lambda v: v if isinstance(v, Markdown) else neutralise.inline("" if v is None else v, 200)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters.update(
        day=_day,
        minus_day=lambda d: d - timedelta(days=1),
        percent=_percent,
        clip=lambda text, limit=280: neutralise.truncate(" ".join(str(text).split()), limit),
        text=lambda value, limit=200: Markdown(neutralise.inline("" if value is None else value, limit)),
        url=Markdown,  # our own links (issue URLs from GitHub), never a report's
    )
    env.globals.update(
        change=_change,
        sparkline=sparkline,
        bars=lambda rows, label: bars([(r["name"], r["reports"]) for r in rows], label),
        spark=lambda values: Markdown(text_sparkline(values)),
        headline=_headline,
        quoted_by=_quoted_by,
        goal_of=_goal_of,
    )
    return env


def render(digest: Digest, kind: str) -> str:
    """The digest as HTML (its stylesheet moved into ``style`` attributes: email clients drop
    or mangle ``<style>`` blocks) or as Markdown."""
    if kind not in FORMATS:
        raise ValueError(f"--format must be one of: {', '.join(FORMATS)} (got {kind!r})")
    if kind == "md":
        return _environment(kind).get_template("digest.md.j2").render(d=digest)
    import css_inline

    html = _environment(kind).get_template("digest.html.j2").render(d=digest)
    return css_inline.CSSInliner(load_remote_stylesheets=False).inline(html)


def write(digest: Digest, folder: Path, kinds: tuple[str, ...] = FORMATS, source: str | None = None) -> list[Path]:
    """``digest-2026-W48.html`` / ``.md`` in ``folder`` (``digest-2026-W48-agent.html`` … for
    one source's digest); returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind in kinds:
        path = folder / f"digest-{digest.week}{f'-{source}' if source else ''}.{kind}"
        path.write_text(render(digest, kind), encoding="utf-8")
        paths.append(path)
    return paths


def chat_text(markdown: str) -> str:
    """The Markdown digest for a chat webhook: Slack ignores backslash escapes and reads
    ``<!channel>``-style sequences, so ``&``, ``<`` and ``>`` become entities (which Slack and
    Markdown-based chats both show as the characters), and the visible ``&#8203;`` that breaks
    mentions becomes the zero-width space itself (Slack does not decode numeric entities)."""
    text = markdown.replace("&#8203;", "\u200b")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def post(markdown: str, url: str, variable: str, timeout: float = 30.0, retries: int = 2) -> None:
    """POST the Markdown digest to a chat webhook as ``{"text": …}`` (Slack, Mattermost and
    most others accept that shape), retrying timeouts, 429 and 5xx.

    The URL is the secret (anyone holding it can post to the channel), so a failure names the
    environment ``variable`` it came from and what went wrong, never the URL: the message is
    printed, logged and kept in Prefect's state."""
    with httpx.Client(timeout=timeout) as client:
        try:
            response = with_retries(
                lambda: client.post(url, json={"text": chat_text(markdown)}), retries, backoff=1.0, cap=30.0
            )
        except GaveUp as failed:
            what = f"answered {failed.response.status_code}" if failed.response is not None else (
                f"could not be reached ({type(failed.error).__name__})"
            )
            raise DigestError(f"the digest webhook (${variable}) {what}; gave up after {failed.tries} tries") from None
    if response.is_error:
        raise DigestError(f"the digest webhook (${variable}) answered {response.status_code}: check the URL in ${variable}")
