"""Where reports come from: one section per ``[[sources]]`` entry, its shape chosen by ``kind``.

The kinds are the registered source plugins (:data:`feedback_insights.core.SOURCES`): each
plugin names the section model it is configured with, a subclass of :class:`SourceConfig`. The
built-in kinds' models are defined here; a plugin's live with the plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, ValidatorFunctionWrapHandler, field_validator

from ..core import DIALECTS, SOURCES
from ._base import Strict, secret


class SourceConfig(Strict):
    """What every source's section has. A plugin's section subclasses it with ``kind`` as a
    ``Literal`` of its own name and the fields it needs."""

    kind: str
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$", description="the collector name records carry")
    dialect: str = "auto"
    service: str | None = Field(None, description="service for dialects that do not name one")

    @field_validator("dialect")
    @classmethod
    def _known_dialect(cls, value: str) -> str:
        choices = DIALECTS.choices()
        if value not in choices:
            raise ValueError(f"must be one of: {', '.join(choices)}")
        return value

    def check_secrets(self) -> None:
        """Raise a ConfigError naming the variable when a secret this source needs is missing."""


class FileDropConfig(SourceConfig):
    """A folder (or one file) of JSON Lines, JSON arrays and Parquet files."""

    kind: Literal["files"]
    path: Path
    patterns: list[str] = ["*.jsonl", "*.ndjson", "*.json", "*.parquet"]


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
