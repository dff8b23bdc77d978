"""When a cluster becomes a drafted issue, what the draft shows, and the optional LLM."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any, ClassVar, Literal
from urllib.parse import quote

from pydantic import Field, ValidationInfo, field_validator

from ..core import FIELDS, JSON_FIELDS
from ._base import Label, Strict, secret

#: The placeholders a ``[drafts.links]`` URL template may use, and where each one's value is in a
#: canonical record. Every scalar field under its own name, except ``account`` (issues show
#: accounts only as counts: a pseudonym in a public link would let readers follow one account
#: across issues); then the keys of the nested fields worth linking, chiefly what an in-session
#: row carries about its turn. The README lists them; a template naming anything else is a
#: configuration error, so a typo never reaches an issue as a dead link.
LINK_PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    **{name: (name,) for name in FIELDS if name not in JSON_FIELDS and name != "account"},
    "instance_id": ("context", "instance_id"),
    "surface": ("context", "surface"),
    "author": ("context", "author"),
    "audio_key": ("context", "audioKey"),
    "app_version": ("context", "appVersion"),
    "target_role": ("evidence", "target_role"),
    "target_at": ("evidence", "target_at"),
    "timeline_seq": ("evidence", "timeline_seq"),
    "agent_name": ("agent", "name"),
    "agent_model": ("agent", "model"),
    "agent_framework": ("agent", "framework"),
}
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_AUTHORITY = re.compile(r"^https?://([^/?#]*)")


def _lookup(record: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _text(value: Any) -> str | None:
    """A placeholder's value as text; nothing (no link) for a missing, empty or nested one."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if value is None or isinstance(value, Mapping | list | bool) or str(value) == "":
        return None
    return str(value)


def _check_template(field: str, template: str) -> None:
    """Why ``template`` cannot decorate ``field``, as a ValueError (pydantic names the key)."""
    if not template.startswith(("https://", "http://")):
        raise ValueError("must start with https:// or http://")
    names = _PLACEHOLDER.findall(template)
    unknown = [name for name in names if name not in LINK_PLACEHOLDERS]
    if unknown:
        known = ", ".join(sorted(LINK_PLACEHOLDERS))
        raise ValueError(f"unknown placeholder {{{unknown[0]}}} (placeholders: {known})")
    if "{" in _PLACEHOLDER.sub("", template) or "}" in _PLACEHOLDER.sub("", template):
        raise ValueError("a { or } opens or closes no placeholder")
    host = _AUTHORITY.match(template)
    if host and (in_host := _PLACEHOLDER.search(host.group(1))):
        raise ValueError(f"{in_host.group(0)} is in the host: a report would choose where the link goes")
    if field not in names:
        raise ValueError(f"must contain the placeholder {{{field}}}")


class EvidenceLinks(Strict):
    """URL templates that turn a report's pointers into links in drafted issues, one per pointer
    the issue shows, e.g. ``trace_id = "https://console.example/v1/instances/{instance_id}/trace?trace_id={trace_id}"``.

    A link is keyed by the pointer it decorates and must name it; it may name any other
    placeholder of :data:`LINK_PLACEHOLDERS` too. Every value is URL-encoded (``/``, ``?``, ``#``
    included), no placeholder may sit in the host, and a report missing any value the
    template names gets its pointer as plain text: no link rather than a broken one."""

    #: Every placeholder and where its value comes from (see :data:`LINK_PLACEHOLDERS`).
    PLACEHOLDERS: ClassVar[dict[str, tuple[str, ...]]] = LINK_PLACEHOLDERS

    request_id: str | None = None
    trace_id: str | None = None
    session_id: str | None = None
    message_id: str | None = None
    instance_id: str | None = None
    timeline_seq: str | None = None
    audio_key: str | None = None

    @field_validator("*")
    @classmethod
    def _template(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            _check_template(str(info.field_name), value)
        return value

    @staticmethod
    def values(record: Mapping[str, Any]) -> dict[str, str]:
        """Every placeholder ``record`` has a value for, as text (nested fields as objects)."""
        found = {name: _text(_lookup(record, path)) for name, path in LINK_PLACEHOLDERS.items()}
        return {name: text for name, text in found.items() if text is not None}

    def url(self, field: str, values: Mapping[str, str]) -> str | None:
        """The link for ``field``, or None: no template, or a value the template names is missing."""
        template = getattr(self, field, None)
        if not template:
            return None
        names = _PLACEHOLDER.findall(template)
        if not all(values.get(name) for name in names):
            return None
        return _PLACEHOLDER.sub(lambda m: quote(values[m.group(1)], safe=""), template)


assert set(EvidenceLinks.model_fields) <= set(LINK_PLACEHOLDERS), "every linked pointer is a placeholder"


class DraftsConfig(Strict):
    """When a cluster of problem reports or of feature requests becomes a drafted issue, and
    what the draft shows."""

    min_accounts: int = Field(3, ge=1, description="distinct accounts a cluster needs for a draft")
    min_accounts_blocking: int = Field(2, ge=1, description="… when one of its reports is blocking")
    refresh_growth: float = Field(0.5, gt=0, description="redraft when accounts grew by this fraction")
    labels: list[Label] = Field(["agent-feedback"], description="labels every drafted issue carries")
    request_labels: list[Label] = Field(
        ["enhancement"], description="labels a drafted feature request carries too (GitHub's own label for one)"
    )
    suggested_labels: list[Label] = Field(
        ["bug", "enhancement", "documentation"], description="labels an LLM may add (others are dropped)"
    )
    quoted_reports: int = Field(5, ge=1, le=50)
    suggestions: int = Field(3, ge=0, le=20)
    evidence_rows: int = Field(20, ge=0, le=500)
    quote_chars: int = Field(600, ge=80, le=10_000, description="longest quoted text, per field")
    links: EvidenceLinks = EvidenceLinks()


DEFAULT_PROMPT_TOKENS = 6000


class LLMConfig(Strict):
    """An OpenAI-compatible chat-completions endpoint for LLM-assisted drafts (absent: the
    template drafts alone) and, when ``clustering`` lists them, LLM-assisted clustering: a
    problem statement embedded with each report, a name per cluster, a judgement on borderline
    pairs. Off by default: it changes how reports group, and costs a call per report."""

    base_url: str = Field(pattern=r"^https?://", description="e.g. https://api.openai.com/v1")
    model: str = Field(min_length=1)
    key_env: str | None = Field(None, description="environment variable holding the API key")
    timeout: float = Field(60.0, gt=0)
    retries: int = Field(2, ge=0, le=10, description="retries of timeouts, rate limits (429) and 5xx; never of a used-up quota")
    max_prompt_tokens: int = Field(DEFAULT_PROMPT_TOKENS, ge=500, description="reports are trimmed to fit")
    max_output_tokens: int = Field(
        800, ge=100, description="sent as max_completion_tokens (max_tokens to an endpoint that refuses it); "
                                 "an answer cut off there is not used")
    json_mode: bool = Field(True, description="send response_format json_object")
    clustering: list[Literal["statements", "names", "merges"]] = Field(
        [], description="LLM-assisted clustering (clusters/_assist.py): none unless listed"
    )

    def key(self) -> str | None:
        return secret(self.key_env, "llm.key_env", "the LLM endpoint's API key") if self.key_env else None
