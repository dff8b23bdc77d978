"""A cluster becomes a drafted issue: from templates, or with an LLM's title and summary.

The LLM writes only the title and a summary paragraph; the demand table, the quoted reports and
the evidence are always rendered by :mod:`._render`, and the LLM's text is neutralised like
any report (it read the reports, so it may have been steered by one). The prompt shows each
report with what the body shows of it: who reported it (:func:`neutralise.attribution`), its
words, the turn it is about (the message, the turn before it, the dictation), the agent and
its pointers, all inside the report's untrusted delimiters; what is said of the cluster (the
service, the demand, the key terms) is inside ``<untrusted_cluster>``. An answer that is not
valid JSON for ``schemas/issue_draft.schema.json`` is retried once, with the problem stated;
after that, or when the endpoint fails, the template draft is used and the reason recorded.

An owner-private report is never shown to the LLM (the endpoint is outside the warehouse): the
prompt holds the other reports and the cluster's shared key terms, and a cluster of private
reports alone is drafted from the templates without a call.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jinja2
import orjson

from ..config import DraftsConfig
from ..core import resource_dir, shared_schemas
from . import neutralise
from ._inputs import DraftInput, agent_of, pointers, turn
from ._llm import ChatClient, LLMError
from ._render import is_feature_request, normalise_title, render_body, render_title

#: The report fields an LLM is shown, in this order.
PROMPT_FIELDS = ("category", "outcome", "severity", "tool", "summary", "detail", "expected", "actual", "suggestion")
#: Reports shown before the token budget is even considered.
MAX_PROMPT_REPORTS = 20
_FENCED = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class LLMCall:
    attempt: int
    prompt_sha256: str
    response_sha256: str | None
    outcome: str  # ok | invalid | error
    error: str | None = None


@dataclass(slots=True)
class Draft:
    title: str
    body: str
    labels: list[str]
    drafted_by: str = "template"
    llm_model: str | None = None
    llm_error: str | None = None
    calls: list[LLMCall] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"title": self.title, "body": self.body, "labels": self.labels}


def labels(draft: DraftInput, settings: DraftsConfig) -> list[str]:
    """The labels every drafted issue carries, and a feature request's own beside them."""
    own = settings.request_labels if is_feature_request(draft) else []
    return list(dict.fromkeys([*settings.labels, *own]))


def template_draft(draft: DraftInput, settings: DraftsConfig) -> Draft:
    return Draft(render_title(draft), render_body(draft, settings), labels(draft, settings))


# -- prompts -----------------------------------------------------------------------------------


@cache
def _prompts() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resource_dir("prompts")),
        autoescape=True,  # every value: & < > " ' become entities, so no report closes its delimiter
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["truncate_chars"] = lambda text, limit: neutralise.truncate(neutralise.clean(str(text)), limit)
    # A value that names or counts something (the service, an id, a key term) is one line: it
    # cannot start a line of its own that reads like a field, or like the rules.
    env.filters["one_line"] = lambda text, limit=200: neutralise.truncate(" ".join(neutralise.clean(str(text)).split()), limit)
    env.filters["attribution"] = neutralise.attribution
    env.globals.update(turn=turn, pointers=pointers, agent_of=agent_of)
    return env


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """A conservative count without a tokenizer: about 4 characters per token in English,
    fewer for ids and punctuation, so characters / 3."""
    return sum(math.ceil(len(m["content"]) / 3) + 4 for m in messages)


def prompt_messages(draft: DraftInput, settings: DraftsConfig, max_tokens: int) -> list[dict[str, str]]:
    """The messages for ``draft``, trimmed to ``max_tokens``: fewer reports first
    (the least telling go), then shorter texts; never an error. The system message is our text
    alone (the configured labels, and whether the cluster asks for a feature rather than reports
    a failure, which changes what its title and summary say): every value taken from records,
    the service's name included, is in the user message inside a delimited block it cannot close."""
    env = _prompts()
    system = env.get_template("draft_system.j2").render(labels=settings.suggested_labels, request=is_feature_request(draft))
    shown = [r for r in draft.reports if not r.get("private")]
    count, limit = min(len(shown), MAX_PROMPT_REPORTS), settings.quote_chars
    while True:
        user = env.get_template("draft_user.j2").render(
            service=draft.service,
            d=draft.demand,
            first_seen=str(draft.demand["first_seen"])[:10],
            last_seen=str(draft.demand["last_seen"])[:10],
            key_terms=draft.shown_terms()[:5],
            reports=shown[:count],
            omitted=len(draft.reports) - count,
            fields=PROMPT_FIELDS,
            limit=limit,
        )
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        if estimate_tokens(messages) <= max_tokens or (count <= 1 and limit <= 80):
            return messages
        if count > 1:
            count -= 1
        else:
            limit = max(80, limit // 2)


# -- the LLM's answer --------------------------------------------------------------------------


def parse_answer(text: str, allowed_labels: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """``(answer, None)`` or ``(None, what is wrong with it)``."""
    fenced = _FENCED.match(text)
    try:
        answer = orjson.loads(fenced.group(1) if fenced else text)
    except orjson.JSONDecodeError as exc:
        return None, f"not JSON: {exc}"
    problems = shared_schemas().check("issue_draft.schema.json", answer)
    if problems:
        return None, "; ".join(map(str, problems[:5]))
    answer["labels"] = [label for label in answer.get("labels", []) if label in allowed_labels]
    return answer, None


def _sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def llm_draft(draft: DraftInput, settings: DraftsConfig, client: ChatClient) -> Draft:
    """The LLM-assisted draft, or the template draft with ``llm_error`` saying why not; a
    cluster whose every report is owner-private has nothing to show an LLM: the template draft."""
    if draft.private_reports == len(draft.reports):
        return template_draft(draft, settings)
    messages = prompt_messages(draft, settings, client.config.max_prompt_tokens)
    calls: list[LLMCall] = []
    problem = ""
    for attempt in (1, 2):
        prompt_hash = _sha256(orjson.dumps(messages))
        try:
            text = client.complete(messages)
        except LLMError as exc:
            calls.append(LLMCall(attempt, prompt_hash, None, "error", str(exc)))
            return _fallback(draft, settings, client, calls, str(exc))
        answer, invalid = parse_answer(text, settings.suggested_labels)
        problem = invalid or ""
        calls.append(LLMCall(attempt, prompt_hash, _sha256(text), "ok" if answer else "invalid", invalid))
        if answer is not None:
            return Draft(
                title=normalise_title(answer["title"]),
                body=render_body(draft, settings, llm_summary=answer["summary"], llm_model=client.config.model),
                labels=list(dict.fromkeys([*labels(draft, settings), *answer["labels"]])),
                drafted_by="llm",
                llm_model=client.config.model,
                calls=calls,
            )
        messages = [
            *messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": f"That answer is invalid ({problem}). Answer with the JSON object only."},
        ]
    return _fallback(draft, settings, client, calls, f"invalid answer twice: {problem}")


def _fallback(draft: DraftInput, settings: DraftsConfig, client: ChatClient, calls: list[LLMCall], why: str) -> Draft:
    fallback = template_draft(draft, settings)
    fallback.llm_model, fallback.llm_error, fallback.calls = client.config.model, why, calls
    return fallback
