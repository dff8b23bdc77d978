"""Pages from Jinja2 templates (autoescaped: every report's text is untrusted) and drafts'
Markdown rendered as GitHub renders it."""

from __future__ import annotations

import re
from datetime import datetime
from functools import cache
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from ._security import session_of


def gfm(markdown: str) -> Markup:
    """GitHub-flavoured Markdown as HTML the way an issue shows it, with cmark-gfm (GitHub's
    own renderer): a line break is a break (GitHub's comment mode, unlike a README's), and in
    its safe mode raw HTML is dropped and ``javascript:``-like links lose their target, as
    GitHub's sanitiser does. The body was neutralised when it was drafted; this is the second
    wall."""
    import cmarkgfm
    from cmarkgfm.cmark import Options  # type: ignore[import-untyped]

    return Markup(cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_HARDBREAKS))


def web_link(url: object) -> str | None:
    """``url`` when it is an http(s) link (issue URLs, configured evidence links), else None."""
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None


#: "cluster 12", "draft 7", "clusters 4 and 6" in a note: linked to their pages.
_MENTION = re.compile(r"\b(cluster|draft)s? ([0-9]{1,10})\b")


def linked(note: str) -> Markup:
    """A flash note with each cluster and draft it names linked to its page: a split says where
    its new cluster is. Escaped first; only digits go into a link."""
    escaped = str(Markup.escape(note))
    return Markup(_MENTION.sub(lambda m: f'<a href="/{m.group(1)}s/{m.group(2)}">{m.group(0)}</a>', escaped))


def _when(value: datetime | None) -> str:
    return "—" if value is None else f"{value:%Y-%m-%d %H:%M} UTC"


def _count(number: int | None, noun: str) -> str:
    """"1 account", "3 accounts"."""
    return f"{number or 0} {noun}{'' if number == 1 else 's'}"


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("feedback_insights.desk", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(counted=_count, when=_when, web_link=web_link, linked=linked, day=lambda d: "—" if d is None else f"{d:%Y-%m-%d}")
    return env


def page(request: Request, template: str, status: int = 200, headers: dict[str, str] | None = None,
         **context: Any) -> HTMLResponse:
    """A page of the desk: the template with the session's CSRF token, reviewer and flash."""
    session = session_of(request)
    desk = request.app.state.desk
    flash, session.flash = session.flash, []
    html = _environment().get_template(template).render(
        csrf=session.csrf, reviewer=desk.access.reviewer(session), login=desk.access.asks_name,
        logged_in=session.reviewer is not None, flash=flash, path=request.url.path, **context,
    )
    return HTMLResponse(html, status_code=status, headers=headers)
