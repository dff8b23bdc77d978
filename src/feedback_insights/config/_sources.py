"""Where reports come from: one section per ``[[sources]]`` entry, its shape chosen by ``kind``.

The kinds are the registered source plugins (:data:`feedback_insights.core.SOURCES`): each
plugin names the section model it is configured with, a subclass of :class:`SourceConfig`. The
built-in kinds' models are defined here; a plugin's live with the plugin.

**Owner-private sources.** ``private = true`` says a source's reports belong to the people who
wrote them (the in-session platform's rows are owner-private by its design: "there is no
scope=all, not even for an admin"). Their words stay in the warehouse and the desk; everything
that leaves carries counts, categories, tools and pointers the owner can open. Only the
platform kind is private by default.

**Which service a report is about.** A report that names its service (an AFP or AFS record,
a SEP-2369 submission with ``service``, an RFC-026 message's ``app_id``) keeps it. One that
names none (a bare AFP submission, an in-session row) gets the first ``service_by_tool``
pattern its tool or endpoint matches, else the source's ``service``. A source whose dialect
never names a service (``session``) must set ``service``: loading the configuration says so.
A report that still has no service is quarantined when it is ingested, never stored without
one (clusters are per service: it would make a cluster of its own), and ``quarantine replay``
takes it again once the source says which.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    AwareDatetime,
    Field,
    TypeAdapter,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from ..core import DIALECTS, SOURCES
from ._base import Strict, secret

#: The longest service name: the AFP record schema's ``maxLength``, so a configured service is
#: never longer than one a record could carry.
SERVICE_CHARS = 128
#: What a service name is, whether a report names it or a source does: one printable line that
#: reads as a name (``acme-companies-api``, ``github.com/acme/api``, ``mcp:orbit@2``). It is put
#: into prompts, issue titles, labels and file names as it is, so no space, line break or
#: control character, and a letter or digit first (no ``-flag``).
SERVICE_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._:/@+-]{{0,{SERVICE_CHARS - 1}}}", re.ASCII)
SERVICE_RULE = (
    f"must be a service name: a letter or digit, then letters, digits and . _ : / @ + -, "
    f"at most {SERVICE_CHARS} characters (no spaces or line breaks)"
)


def is_service_name(value: object) -> bool:
    """Whether ``value`` is a service name (:data:`SERVICE_NAME`, the whole of it: a regex's
    ``$`` would let a trailing line break through)."""
    return isinstance(value, str) and SERVICE_NAME.fullmatch(value) is not None


def _service_name(value: str) -> str:
    if not is_service_name(value):
        raise ValueError(SERVICE_RULE)
    return value


#: The longest tool or endpoint glob of ``service_by_tool``.
GLOB_CHARS = 512
Service = Annotated[str, Field(min_length=1, max_length=SERVICE_CHARS), AfterValidator(_service_name)]


class SourceConfig(Strict):
    """What every source's section has. A plugin's section subclasses it with ``kind`` as a
    ``Literal`` of its own name and the fields it needs."""

    kind: str
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$", description="the collector name records carry")
    dialect: str = "auto"
    service: Service | None = Field(
        None, validate_default=True, description="the service of reports that name none"
    )
    service_by_tool: dict[Annotated[str, Field(min_length=1, max_length=GLOB_CHARS)], Service] = Field(
        default_factory=dict,
        description="tool or endpoint glob → service, for reports that name none; the first match wins over service",
    )
    private: bool = Field(
        False,
        description="owner-private: no report's words leave the warehouse and the desk (issues, digests, webhooks, "
                    "email and known_issue carry counts, categories and pointers instead)",
    )

    @field_validator("dialect")
    @classmethod
    def _known_dialect(cls, value: str) -> str:
        choices = DIALECTS.choices()
        if value not in choices:
            raise ValueError(f"must be one of: {', '.join(choices)}")
        return value

    @field_validator("service")
    @classmethod
    def _said_when_the_dialect_names_none(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Reports of a dialect that never names its service could not be told apart by service
        at all: the mistake is a configuration one, so it is reported when the file is loaded."""
        choice = info.data.get("dialect")  # absent when the dialect itself was wrong
        if value is None and choice is not None and not any(map(names_service, DIALECTS.choices()[choice])):
            nameless = ", ".join(n for n in DIALECTS.choices()["auto"] if not names_service(n))
            raise ValueError(
                f"source {info.data.get('name')!r} reads dialect {choice!r}, whose reports name no service: "
                f"set service (dialects that name none: {nameless})"
            )
        return value

    def check_secrets(self) -> None:
        """Raise a ConfigError naming the variable when a secret this source needs is missing."""


class FileDropConfig(SourceConfig):
    """A folder (or one file) of JSON Lines, JSON arrays and Parquet files."""

    kind: Literal["files"]
    path: Path
    patterns: list[str] = ["*.jsonl", "*.ndjson", "*.json", "*.parquet"]
    #: When the reports of a file that carry no time of their own (bare AFP submissions) were
    #: received: ``file``, the file's modification time (when it was delivered, whenever a run
    #: gets to it, and the same on every re-ingest); ``ingest``, the time the run read it; or a
    #: fixed RFC 3339 time with an offset, not in the future (it would put the reports in a week
    #: that has not happened). A report's own time always wins.
    received_at: Literal["file", "ingest"] | AwareDatetime = "file"

    @field_validator("received_at", mode="before")
    @classmethod
    def _rule_or_time(cls, value: Any) -> Any:
        """One plain message instead of a union's two: what the setting accepts."""
        if value in ("file", "ingest"):
            return value
        try:
            moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise ValueError("must be file, ingest, or an RFC 3339 time with an offset (2026-11-29T23:59:59Z)")
        if moment > datetime.now(UTC) + timedelta(days=1):  # a day of leeway for clocks and time zones
            raise ValueError(f"{moment.isoformat()} is in the future")
        return moment


class SqlTableConfig(SourceConfig):
    """In-session ``agent_feedback`` rows in a SQLite or DuckDB file."""

    kind: Literal["sql"]
    path: Path
    table: str = Field("agent_feedback", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    dialect: str = "session"
    lookback_seconds: int = Field(600, ge=0, description="re-read this far behind the cursor for late commits")
    write_back: bool = Field(False, description="mark rows filed, with issue_url, once their issue is filed")


class HttpCollectorConfig(SourceConfig):
    """A collector's pull API (``GET /v1/records``), read with a pipeline key."""

    kind: Literal["http"]
    url: str = Field(pattern=r"^https?://")
    key_env: str = Field(description="environment variable that holds the pipeline key")
    page_size: int = Field(500, ge=1, le=1000)
    retries: int = Field(4, ge=0, le=10, description="retries of 429, 5xx and connection failures")
    known_issues: bool = Field(True, description="PUT known issues back to this collector")

    def key(self) -> str:
        return secret(self.key_env, f"source {self.name!r}", "this collector's pipeline key")

    def check_secrets(self) -> None:
        self.key()


def names_service(dialect: str) -> bool:
    """Whether reports of ``dialect`` can name their service (its ``NAMES_SERVICE``, default
    true: a plugin that says nothing is trusted to)."""
    return bool(getattr(DIALECTS.get(dialect), "NAMES_SERVICE", True))


def by_kind(value: Any, handler: ValidatorFunctionWrapHandler) -> SourceConfig:
    """A ``[[sources]]`` table as the section model its ``kind`` registers (a discriminated
    union of the registered kinds, so a wrong key is reported as ``sources.N.key``)."""
    if isinstance(value, SourceConfig):
        return value
    return _union(tuple(SOURCES.names())).validate_python(value)


_UNIONS: dict[tuple[str, ...], TypeAdapter[Any]] = {}


def _union(names: tuple[str, ...]) -> TypeAdapter[Any]:
    if names not in _UNIONS:
        models = tuple(SOURCES.get(name).config_model for name in names)
        if len(models) == 1:  # a union of one is that model, and takes no discriminator
            _UNIONS[names] = TypeAdapter(models[0])
        else:
            _UNIONS[names] = TypeAdapter(Annotated[Union[models], Field(discriminator="kind")])  # type: ignore[arg-type]  # a union made at run time
    return _UNIONS[names]
