"""The weekly digest rendered: HTML for browsers and email, Markdown for wikis and chats that
read it, Slack's mrkdwn, and plain text for the email's text part.

All come from Jinja2 templates in ``templates/``. The HTML environment autoescapes (agents'
words are text); the others pass every value they print through their medium's neutraliser
(Markdown: :mod:`neutralise`, like issue bodies; mrkdwn: :mod:`._mrkdwn`; plain text: mentions
and autolinks broken), unless a filter made it on purpose. Every quote is attributed by its
record's source, with the words issues use (:func:`neutralise.attribution`): an owner's
complaint is not shown as an agent's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, get_args

import httpx
import jinja2
from markupsafe import Markup

from ..config import WebhookFormat
from ..core import GaveUp, with_retries
from ..drafts import Markdown, neutralise
from . import _mrkdwn
from ._charts import AttachedCharts, InlineCharts, text_sparkline
from ._content import Digest, DigestError

FORMATS = ("html", "md")
#: ``[digest] webhook_format``'s values, as the configuration defines them.
WEBHOOK_FORMATS: tuple[str, ...] = get_args(WebhookFormat)
#: The singular and plural of the words counted in the digest that are not just "+s".
_PLURALS = {"person": "people"}
#: Who is behind each tier's accounts, as a count reads: "1 agent", "2 people".
_TIER_WORDS = {"agent": "agent", "runtime": "runtime", "human": "person"}


class Plain(str):
    """Plain text made on purpose (by a filter here); printed as is in the text part."""


def _day(value: datetime | date) -> str:
    return value.strftime("%a %d %b %Y")


def _percent(value: float | None) -> str:
    return f"{(value or 0) * 100:.0f}%"


def many(count: int | None, word: str, plural: str | None = None) -> str:
    """"1 account", "3 accounts", "0 accounts"; ``plural`` where "+s" is wrong."""
    count = count or 0
    return f"{count} {word if count == 1 else plural or _PLURALS.get(word, word + 's')}"


def _delta(now: int | None, before: int | None) -> str:
    """"+2", "−1", "±0": the change from last week."""
    delta = (now or 0) - (before or 0)
    return "±0" if delta == 0 else f"{'+' if delta > 0 else '−'}{abs(delta)}"


def _change(now: int, before: int) -> str:
    if not before:
        return ""
    return f"({_delta(now, before)} vs last week)"


def _who(tiers: dict[str, int]) -> str:
    """This week's accounts of a problem by who reported: "2 agents, 1 person"."""
    return ", ".join(many(n, _TIER_WORDS[tier]) for tier, n in tiers.items() if n)


def _figures(values: list[int]) -> str:
    """A sparkline's figures as text: "0 · 3 · 3 · 2"."""
    return " · ".join(str(v) for v in values)


def _quoted_record(row: dict[str, Any]) -> dict[str, Any]:
    """What attribution reads of the record a row quotes: its ``source``, ``dialect`` and
    ``rating``, given by the content as ``quote_source``, ``quote_dialect`` and
    ``quote_rating``. A row without them is attributed to no one in particular."""
    return {"source": row.get("quote_source"), "dialect": row.get("quote_dialect"), "rating": row.get("quote_rating")}


#: A thumb in words beside it: where no emoji font is installed the emoji is an empty box.
_THUMB_WORDS = {"👍": "👍 (thumbs up)", "👎": "👎 (thumbs down)"}


def _quoted_by(row: dict[str, Any], lower: bool = False) -> str:
    """"An agent reported", "The owner rated it 👎 (thumbs down) and wrote" … before a row's
    quote ("… rated it 👎 (thumbs down)" when it has no words); ``lower`` mid-sentence."""
    phrase = neutralise.attribution(_quoted_record(row), wrote=bool(row.get("quote")))
    for thumb, words in _THUMB_WORDS.items():
        phrase = phrase.replace(thumb, words)
    return phrase[0].lower() + phrase[1:] if lower else phrase


def _goal_of(row: dict[str, Any]) -> str:
    """"An agent's goal", "A user's goal" … before a goal theme's quote."""
    return f"{neutralise.reporter(_quoted_record(row))}'s goal"


def _plain(value: object, limit: int = 300) -> str:
    """One line of plain text a mail client shows as is, but would autolink or treat as a
    mention: those are broken with a literal zero-width space (:func:`neutralise.title`)."""
    return neutralise.title("" if value is None else value, limit)


def _own(words: Callable[..., str]) -> Callable[..., Markup]:
    """A helper that writes our own words and figures ("+2", "2 agents, 1 person"): printed as
    they are in every medium."""
    return lambda *args: Markup(words(*args))


def _finalizer(kind: str) -> Callable[[Any], Any] | None:
    """What every printed value goes through: made inert, unless a filter made it (or it is a
    macro's output, marked ``| safe``: the template's own text, its values made inert inside)."""
    if kind == "md":
        return lambda v: v if isinstance(v, Markdown | Markup) else neutralise.inline("" if v is None else v, 200)
    if kind == "slack":
        return lambda v: v if isinstance(v, _mrkdwn.Mrkdwn | Markup) else _mrkdwn.inline("" if v is None else v, 200)
    if kind == "text":
        return lambda v: v if isinstance(v, Plain | Markup) else _plain(v)
    return None


#: Per medium: a value made inert at a given length, and one of our own links.
_TEXT: dict[str, Callable[[Any, int], str]] = {
    "md": lambda v, limit: Markdown(neutralise.inline("" if v is None else v, limit)),
    "slack": lambda v, limit: _mrkdwn.Mrkdwn(_mrkdwn.inline("" if v is None else v, limit)),
    "text": lambda v, limit: Plain(_plain(v, limit)),
}


def _link(kind: str) -> Callable[[str | None, str], str]:
    """``link(url, text)`` in the medium, for our own URLs (an issue, the desk: never a report's)
    and our own words ("filed as #12")."""
    def link(url: str | None, text: str) -> str:
        if kind == "md":
            # "#12" is no reference to whichever repository a wiki belongs to: broken with the
            # zero-width character itself, which every reader hides (the entity neutralise writes
            # for GitHub shows as "&#8203;" in a chat or a plain Markdown viewer).
            text = re.sub(r"#(?=\d)", "#\u200b", text)
            return Markdown(f"[{text}]({url})" if url else text)
        if kind == "slack":
            return _mrkdwn.link(url, text) if url else _mrkdwn.Mrkdwn(_mrkdwn.escape(text))
        return Plain(f"{text} ({url})" if url else text)
    return link


@cache
def _environment(kind: str) -> jinja2.Environment:
    html = kind == "html"
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("feedback_insights.digest", "templates"),
        autoescape=html,
        finalize=_finalizer(kind),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=not html,
        lstrip_blocks=not html,
    )
    env.filters.update(
        day=_day,
        minus_day=lambda d: d - timedelta(days=1),
        percent=_percent,
        clip=lambda text, limit=280: neutralise.truncate(" ".join(str(text).split()), limit),
        many=many,
    )
    env.globals.update(  # our own words and figures: printed as they are in every medium
        change=_own(_change),
        delta=_own(_delta),
        who=_own(_who),
        figures=_own(_figures),
        spark=_own(text_sparkline),
        quoted_by=_quoted_by,
        goal_of=_goal_of,
    )
    if not html:
        env.filters["text"] = lambda value, limit=200: _TEXT[kind](value, limit)
        env.globals["link"] = _link(kind)
    return env


def _html(digest: Digest, charts: InlineCharts | AttachedCharts) -> str:
    """The HTML laid out with tables (email clients ignore flex), its stylesheet moved into
    ``style`` attributes (they drop or mangle ``<style>`` blocks)."""
    import css_inline

    html = _environment("html").get_template("digest.html.j2").render(d=digest, charts=charts)
    return css_inline.CSSInliner(load_remote_stylesheets=False).inline(html)


def render(digest: Digest, kind: str) -> str:
    """The digest as HTML (charts inline SVG) or as Markdown."""
    if kind not in FORMATS:
        raise ValueError(f"--format must be one of: {', '.join(FORMATS)} (got {kind!r})")
    if kind == "md":
        return _environment(kind).get_template("digest.md.j2").render(d=digest)
    return _html(digest, InlineCharts())


def render_email(digest: Digest) -> tuple[str, str, AttachedCharts]:
    """The digest for email: its HTML (charts as ``cid:`` images), its plain text, and the
    charts to attach."""
    charts = AttachedCharts()
    html = _html(digest, charts)
    text = _environment("text").get_template("digest.txt.j2").render(d=digest)
    return html, text, charts


def webhook_text(digest: Digest, webhook_format: str) -> str:
    """What the chat webhook is sent: Slack's mrkdwn, or the Markdown digest."""
    if webhook_format not in WEBHOOK_FORMATS:
        raise ValueError(f"webhook_format must be one of: {', '.join(WEBHOOK_FORMATS)} (got {webhook_format!r})")
    if webhook_format == "markdown":
        return render(digest, "md")
    return _environment("slack").get_template("digest.slack.j2").render(d=digest)


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


def post(text: str, url: str, variable: str, timeout: float = 30.0, retries: int = 2) -> None:
    """POST the digest's text to a chat webhook as ``{"text": …}`` (Slack, Mattermost and
    most others accept that shape), retrying timeouts, 429 and 5xx.

    The URL is the secret (anyone holding it can post to the channel), so a failure names the
    environment ``variable`` it came from and what went wrong, never the URL: the message is
    printed, logged and kept in Prefect's state."""
    with httpx.Client(timeout=timeout) as client:
        try:
            response = with_retries(lambda: client.post(url, json={"text": text}), retries, backoff=1.0, cap=30.0)
        except GaveUp as failed:
            what = f"answered {failed.response.status_code}" if failed.response is not None else (
                f"could not be reached ({type(failed.error).__name__})"
            )
            raise DigestError(f"the digest webhook (${variable}) {what}; gave up after {failed.tries} tries") from None
    if response.is_error:
        raise DigestError(f"the digest webhook (${variable}) answered {response.status_code}: check the URL in ${variable}")
