"""A drafted issue's title and body, rendered from Jinja2 templates in ``templates/``.

Safe by default: the body environment's ``finalize`` neutralises every value a template prints
(:func:`neutralise.inline`), so a template author who forgets a filter still cannot let a
report's text become markdown. Only the filters here return :class:`Markdown`, for the two
things that must be markdown: a report's words quoted (inert, in a blockquote), its snapshots
of the turn it is about among them, and our own links built from configured URL templates.
Every quote is attributed by its report's source (:func:`neutralise.attribution`). An
owner-private report (``private``: :mod:`._inputs`) is never quoted: the templates list it by
its category, tool and pointers, the body says how many such reports there are, and the title
is the cluster's neutral name.
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
from ._inputs import EVIDENCE_FIELDS, DraftInput, agent_of, pointers, turn
from ._marker import marker, update_marker

#: GitHub refuses bodies over 65,536 characters; escaping can grow a text five-fold.
MAX_BODY = 60_000
#: The longest value a template prints without a filter (ids, tools, terms).
MAX_VALUE = 200
#: The longest issue title, in characters: a cluster's name is at most 80 too.
TITLE_CHARS = 80
#: What a title does not end with: a period (a title is not a sentence), nor, before the
#: ellipsis of a cut, the punctuation the cut left dangling.
_TRAILING_PERIOD = re.compile(r"[\s.]+$")
_DANGLING = re.compile(r"[\s.,;:—–-]+$")
#: The longest pointer an evidence table cell shows (its link, if any, holds all of it).
CELL_VALUE = 40
#: How a body names each pointer: in a quoted report's list, and as an evidence table column.
POINTER_LABELS = {
    "request_id": "Request", "trace_id": "Trace", "session_id": "Session", "message_id": "Message",
    "instance_id": "Instance", "timeline_seq": "Timeline step", "audio_key": "Audio",
}
#: The order a quoted report lists its pointers in: where it happened first, then what to open.
_LISTED = ("instance_id", "trace_id", "message_id", "session_id", "timeline_seq", "request_id", "audio_key")


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
    env.filters["attribution"] = neutralise.attribution
    env.filters["reporter"] = neutralise.reporter
    env.globals["turn"] = turn
    return env


def is_feature_request(draft: DraftInput) -> bool:
    """Whether the draft is of a request cluster (lane feature_request): drafted as a feature
    request, with its own body and labels, not as a bug."""
    return draft.demand.get("polarity") == "request"


def _goals(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reports among ``reports`` with a goal of their own, one per goal (case and spacing
    folded): why they asked. Drawn from the quoted reports only, so that the body cites no
    record beyond those (an erasure finds the draft by them)."""
    seen: set[str] = set()
    picked = []
    for report in reports:
        if report.get("private"):
            continue  # an owner's words
        goal = " ".join(str(report.get("goal") or "").split()).lower()
        if goal and goal not in seen:
            seen.add(goal)
            picked.append(report)
    return picked


def _reporters(draft: DraftInput) -> str:
    return neutralise.reporters(r.get("source") for r in draft.reports)


def render_update(draft: DraftInput, was: int, settings: DraftsConfig) -> str:
    """The comment posted on a filed issue when its cluster grew materially."""
    newest = draft.newest()
    link = _link(settings.links)
    comment = _environment().get_template("issue_update.md.j2").render(
        marker=Markdown(update_marker(draft.cluster_id, draft.demand["accounts"])),
        d=draft.demand, was=was, newest=newest, limit=settings.quote_chars, private=draft.private_reports,
        who=_reporters(draft), link=link, facts=_facts(link), asked=is_feature_request(draft),
    )
    return re.sub(r"\n{3,}", "\n\n", comment).rstrip("\n") + "\n"


def render_title(draft: DraftInput) -> str:
    """"Tool or endpoint: symptom" (``templates/issue_title.j2``), through :func:`normalise_title`."""
    template = _environment(markdown=False).get_template("issue_title.j2")
    return normalise_title(template.render(service=draft.service, name=draft.name, headline=draft.headline))


def normalise_title(text: str, limit: int = TITLE_CHARS) -> str:
    """An issue title, ours or an LLM's: one line of plain text without a trailing period, at
    most ``limit`` characters, cut at a word boundary with "…" when longer (mid-word only when
    the text's last space is in its first half), then neutralised (:func:`neutralise.title`:
    mentions, references and links broken)."""
    flat = _TRAILING_PERIOD.sub("", " ".join(neutralise.clean(str(text)).split()))
    if len(flat) > limit:
        cut = flat[: limit - 1]
        space = cut.rfind(" ")
        flat = _DANGLING.sub("", cut[:space] if space > limit // 2 else cut) + "…"
    # Breaking an action adds one invisible character: room for that, never a second cut.
    return neutralise.title(flat, 2 * len(flat) + 1)


def render_body(
    draft: DraftInput, settings: DraftsConfig, llm_summary: str | None = None, llm_model: str | None = None
) -> str:
    """The issue body: a problem's (``issue_body.md.j2``) or a feature request's
    (``issue_request.md.j2``: what was asked for and why). One GitHub would refuse as too long
    (escaping can grow a text five-fold) is rendered again with shorter quotes, then with one
    report and no evidence."""
    limit = settings.quote_chars
    body = _render_body(draft, settings, limit, llm_summary, llm_model)
    while len(body) > MAX_BODY and limit > 80:
        limit = max(80, limit // 2)
        body = _render_body(draft, settings, limit, llm_summary, llm_model)
    if len(body) > MAX_BODY:
        fewer = settings.model_copy(update={"quoted_reports": 1, "suggestions": 1, "evidence_rows": 0})
        body = _render_body(draft, fewer, limit, llm_summary, llm_model)
    return body


Link = Callable[..., Markdown]


def _link(links: EvidenceLinks) -> Link:
    """Our own links: a report's pointer as inert text, linked when a configured URL template
    has every value it names (each URL-encoded); a pointer it lacks is an empty cell."""

    def link(report: dict[str, Any], field: str, width: int = CELL_VALUE) -> Markdown:
        value = pointers(report).get(field)
        if value is None:
            return Markdown("")
        text = neutralise.inline(value, width)
        url = links.url(field, EvidenceLinks.values(report))
        return Markdown(f"[{text}]({url})" if url else text)

    return link


def _facts(link: Link) -> Callable[[dict[str, Any]], list[tuple[str, Markdown]]]:
    """A quoted report's list: the agent, the surface and every pointer it has, as
    ``(label, inert markdown)``; a template prints it as a bullet list."""

    def facts(report: dict[str, Any]) -> list[tuple[str, Markdown]]:
        described = [("Agent", agent_of(report)), ("Surface", (report.get("context") or {}).get("surface"))]
        listed = [(label, Markdown(neutralise.inline(value, MAX_VALUE))) for label, value in described if value]
        found = pointers(report)
        return listed + [(POINTER_LABELS[f], link(report, f, MAX_VALUE)) for f in _LISTED if f in found]

    return facts


def _render_body(
    draft: DraftInput, settings: DraftsConfig, limit: int, llm_summary: str | None, llm_model: str | None
) -> str:
    evidence = draft.evidence()
    shown = evidence[: settings.evidence_rows]
    link = _link(settings.links)
    quoted = draft.reports[: settings.quoted_reports]
    template = "issue_request.md.j2" if is_feature_request(draft) else "issue_body.md.j2"
    body = _environment().get_template(template).render(
        link=link,
        facts=_facts(link),
        who=_reporters(draft),
        columns=[(f, POINTER_LABELS[f]) for f in EVIDENCE_FIELDS if any(f in pointers(r) for r in shown)],
        marker=Markdown(marker(draft.cluster_id)),
        cluster_id=draft.cluster_id,
        service=draft.service,
        d=draft.demand,
        key_terms=draft.shown_terms()[:5],
        private=draft.private_reports,
        llm_summary=llm_summary,
        llm_model=llm_model,
        quoted=quoted,
        goals=_goals(quoted),
        suggestions=draft.suggestions(settings.suggestions),
        evidence=shown,
        more_evidence=max(0, len(evidence) - settings.evidence_rows),
        limit=limit,
    )
    return re.sub(r"\n{3,}", "\n\n", body)


def render_emptied(cluster_id: int) -> str:
    """The body of a filed issue whose every report was erased: the marker (so a later run still
    finds the issue) and a sentence saying why nothing is quoted."""
    return _environment().get_template("issue_emptied.md.j2").render(marker=Markdown(marker(cluster_id)))


def render_filed_by_hand(cluster_id: int, url: str) -> str:
    """The body of a draft that follows an issue someone filed by hand: never published, but
    ``drafts show``/``edit`` need the marker and a line saying where the real issue is."""
    template = _environment().get_template("issue_filed_by_hand.md.j2")
    return template.render(marker=Markdown(marker(cluster_id)), url=Markdown(neutralise.inline(url, MAX_VALUE)))
