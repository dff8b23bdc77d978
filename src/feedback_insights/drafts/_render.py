"""A drafted issue's title and body, rendered from Jinja2 templates in ``templates/``.

Safe by default: the body environment's ``finalize`` neutralises every value a template prints
(:func:`neutralise.inline`), so a template author who forgets a filter still cannot let a
report's text become markdown. Only the filters here return :class:`Markdown`, for the two
things that must be markdown: a report's words quoted (inert, in a blockquote) and our own
evidence links built from configured URL templates.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from functools import cache
from typing import Any

import jinja2

from ..config import DraftsConfig, EvidenceLinks
from . import neutralise
from ._inputs import DraftInput
from ._marker import marker, update_marker

#: GitHub refuses bodies over 65,536 characters; escaping can grow a text five-fold.
MAX_BODY = 60_000
#: The longest value a template prints without a filter (ids, tools, terms).
MAX_VALUE = 200


class Markdown(str):
    """Text that is markdown on purpose (made by a filter here); printed as is."""


def _finalize(value: Any) -> Any:
    if isinstance(value, Markdown):
        return value
    return neutralise.inline("" if value is None else value, MAX_VALUE)


def _day(value: datetime | date | str | None) -> str:
    if isinstance(value, datetime | date):
        return value.strftime("%Y-%m-%d")
    return str(value or "?")[:10]


def _mix(histogram: dict[str, int] | None) -> str:
    if not histogram:
        return "none"
    return " · ".join(f"{key} {count}" for key, count in sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0])))


@cache
def _environment(markdown: bool = True) -> jinja2.Environment:
    """The body's environment neutralises every value; the title's is plain text, neutralised
    as a whole by :func:`neutralise.title` (a title is not markdown)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("feedback_insights.drafts", "templates"),
        finalize=_finalize if markdown else None,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # markdown, not HTML: neutralise does the escaping
    )
    env.filters["quote"] = lambda text, limit=None: Markdown(neutralise.quote(text or "", limit))
    env.filters["day"] = _day
    env.filters["mix"] = _mix
    return env


def render_update(draft: DraftInput, was: int, settings: DraftsConfig) -> str:
    """The comment posted on a filed issue when its cluster grew materially."""
    newest = max(draft.reports, key=lambda r: r["received_at"], default=None)
    return _environment().get_template("issue_update.md.j2").render(
        marker=Markdown(update_marker(draft.cluster_id, draft.demand["accounts"])),
        d=draft.demand, was=was, newest=newest, limit=settings.quote_chars,
    )


def render_title(draft: DraftInput) -> str:
    template = _environment(markdown=False).get_template("issue_title.j2")
    return neutralise.title(template.render(service=draft.service, headline=draft.headline).strip(), 100)


def render_body(
    draft: DraftInput, settings: DraftsConfig, llm_summary: str | None = None, llm_model: str | None = None
) -> str:
    """The issue body. One GitHub would refuse as too long (escaping can grow a text
    five-fold) is rendered again with shorter quotes, then with one report and no evidence."""
    limit = settings.quote_chars
    body = _render_body(draft, settings, limit, llm_summary, llm_model)
    while len(body) > MAX_BODY and limit > 80:
        limit = max(80, limit // 2)
        body = _render_body(draft, settings, limit, llm_summary, llm_model)
    if len(body) > MAX_BODY:
        fewer = settings.model_copy(update={"quoted_reports": 1, "suggestions": 1, "evidence_rows": 0})
        body = _render_body(draft, fewer, limit, llm_summary, llm_model)
    return body


def _link(links: EvidenceLinks) -> Callable[[dict[str, Any], str], Markdown]:
    """Our own links: a configured URL template with the id URL-encoded, the id as inert text."""

    def link(report: dict[str, Any], field: str) -> Markdown:
        value = report.get(field)
        if not value:
            return Markdown("")
        text = neutralise.inline(value, 40)
        url = links.url(field, str(value))
        return Markdown(f"[{text}]({url})" if url else text)

    return link


def _render_body(
    draft: DraftInput, settings: DraftsConfig, limit: int, llm_summary: str | None, llm_model: str | None
) -> str:
    evidence = draft.evidence()
    body = _environment().get_template("issue_body.md.j2").render(
        link=_link(settings.links),
        marker=Markdown(marker(draft.cluster_id)),
        cluster_id=draft.cluster_id,
        service=draft.service,
        d=draft.demand,
        key_terms=draft.key_terms[:5],
        llm_summary=llm_summary,
        llm_model=llm_model,
        quoted=draft.reports[: settings.quoted_reports],
        suggestions=draft.suggestions(settings.suggestions),
        evidence=evidence[: settings.evidence_rows],
        more_evidence=max(0, len(evidence) - settings.evidence_rows),
        limit=limit,
    )
    return re.sub(r"\n{3,}", "\n\n", body)
