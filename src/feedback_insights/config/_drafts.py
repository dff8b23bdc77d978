"""When a cluster becomes a drafted issue, what the draft shows, and the optional LLM."""

from __future__ import annotations

from urllib.parse import quote

from pydantic import Field, ValidationInfo, field_validator

from ._base import Label, Strict, secret

_PLACEHOLDERS = ("request_id", "trace_id", "session_id", "message_id")


class EvidenceLinks(Strict):
    """URL templates that turn a report's evidence pointers into links in drafted issues, e.g.
    ``trace_id = "https://console.example/trace?id={trace_id}"``. The id is URL-encoded."""

    request_id: str | None = None
    trace_id: str | None = None
    session_id: str | None = None
    message_id: str | None = None

    @field_validator(*_PLACEHOLDERS)
    @classmethod
    def _template(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            if not value.startswith(("https://", "http://")):
                raise ValueError("must start with https:// or http://")
            if f"{{{info.field_name}}}" not in value:
                raise ValueError(f"must contain the placeholder {{{info.field_name}}}")
        return value

    def url(self, field: str, value: str) -> str | None:
        template = getattr(self, field)
        return template.replace(f"{{{field}}}", quote(value, safe="")) if template else None


class DraftsConfig(Strict):
    """When a cluster of problem reports becomes a drafted issue, and what the draft shows."""

    min_accounts: int = Field(3, ge=1, description="distinct accounts a cluster needs for a draft")
    min_accounts_blocking: int = Field(2, ge=1, description="… when one of its reports is blocking")
    refresh_growth: float = Field(0.5, gt=0, description="redraft when accounts grew by this fraction")
    labels: list[Label] = Field(["agent-feedback"], description="labels every drafted issue carries")
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
    template drafts alone)."""

    base_url: str = Field(pattern=r"^https?://", description="e.g. https://api.openai.com/v1")
    model: str = Field(min_length=1)
    key_env: str | None = Field(None, description="environment variable holding the API key")
    timeout: float = Field(60.0, gt=0)
    retries: int = Field(2, ge=0, le=10, description="retries of timeouts, 429 and 5xx")
    max_prompt_tokens: int = Field(DEFAULT_PROMPT_TOKENS, ge=500, description="reports are trimmed to fit")
    max_output_tokens: int = Field(800, ge=100)
    json_mode: bool = Field(True, description="send response_format json_object")

    def key(self) -> str | None:
        return secret(self.key_env, "llm.key_env", "the LLM endpoint's API key") if self.key_env else None
