"""Where the configuration is read from, and the embedded default.

``--config PATH``, else ``$FEEDBACK_INSIGHTS_CONFIG``, else ``./feedback-insights.toml`` when
present, else the embedded default (the packaged sample data into ``./feedback.duckdb``).
Relative paths in a file are relative to that file. A wrong key or value is a
:class:`ConfigError` whose message names the key path of every problem, e.g.
``feedback-insights.toml: sources.1.path: field required``, and suggests the key an unknown one
was probably meant to be.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, SecretStr, ValidationError
from pydantic_core import ErrorDetails

from ..core import SOURCES, sample_dir
from ._base import ConfigError
from ._config import Config
from ._ingest import SAMPLE_HMAC_KEY, PrivacyConfig, WarehouseConfig
from ._sources import FileDropConfig, SqlTableConfig

ENV_CONFIG = "FEEDBACK_INSIGHTS_CONFIG"
DEFAULT_FILE = "feedback-insights.toml"


#: When the sample's bare AFP submissions (which carry no time) count as received: the close
#: of its last week, Sunday 2026-11-29, so that the digest's weeks are the sample's Mon–Sun weeks.
SAMPLE_DELIVERED_AT = datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC)


def embedded_default(warehouse: Path = Path("feedback.duckdb")) -> Config:
    """The sample data shipped with the project, into a local DuckDB file.

    Its bare AFP submissions name neither service nor time, so they are a source of their own
    that says both: the HTTP API's endpoints are paths, the MCP server's tools are names.
    """
    sample = sample_dir()
    return Config(
        warehouse=WarehouseConfig(path=warehouse),
        privacy=PrivacyConfig(hmac_key=SecretStr(SAMPLE_HMAC_KEY)),
        sources=[
            FileDropConfig(
                kind="files",
                name="sample",
                path=sample,
                patterns=["afp_records.jsonl", "afs.jsonl", "sep2369.jsonl", "rfc026.json"],
            ),
            FileDropConfig(
                kind="files",
                name="sample-submissions",
                path=sample / "afp_submissions.jsonl",
                dialect="afp",
                service="orbit-mcp",
                service_by_tool={"/*": "acme-companies-api"},
                received_at=SAMPLE_DELIVERED_AT,
            ),
            SqlTableConfig(kind="sql", name="sample-session", path=sample / "session.sqlite", service="pags-console"),
        ],
    )


def _format(error: ValidationError, origin: str) -> str:
    """Every problem pydantic found, one per line, each named by its key path: a file with three
    mistakes is fixed in one pass, not three."""
    problems = [_problem(e) for e in error.errors()]
    if len(problems) == 1:
        return f"{origin}: {problems[0]}"
    return f"{origin}: {len(problems)} problems:\n" + "\n".join(f"  {p}" for p in problems)


def _problem(error: ErrorDetails) -> str:
    loc = list(error["loc"])
    fields = _fields_at(loc[:-1])
    if len(loc) > 2 and loc[0] == "sources" and loc[2] in SOURCES.names():
        del loc[2]  # the union member a [[sources]] table was validated as: its kind, not a key
    path = ".".join(str(p) for p in loc)
    if loc in (["source"], ["sources"]) and error["type"] in ("extra_forbidden", "list_type"):
        return (f"{path}: [{path}] is not a section: sources are a list of tables, each written "
                "[[sources]] (two brackets), one per source")
    if error["type"] == "extra_forbidden":
        close = _closest(str(loc[-1]), fields)
        return f"{path}: unknown key" + (f" (did you mean `{close}`?)" if close else "")
    message = error["msg"].removeprefix("Value error, ")
    return f"{path}: {message[0].lower()}{message[1:]}"


def _fields_at(loc: list[str | int]) -> list[str]:
    """The keys the section at ``loc`` takes (empty when it is not a section, e.g. a table of
    free keys such as ``[github] repos``)."""
    model: type[BaseModel] | None = Config
    for part in loc:
        if model is None or isinstance(part, int):
            continue  # a list's index: the items are the same model
        if part in model.model_fields:
            model = _model_in(model.model_fields[part].annotation)
        elif part in SOURCES.names():
            model = SOURCES.get(part).config_model  # the kind a [[sources]] table was read as
        else:
            return []
    return list(model.model_fields) if model else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The section model inside a field's type (``LLMConfig | None``, ``list[SourceConfig]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for arg in get_args(annotation) if (m := _model_in(arg))), None)


def _closest(key: str, fields: list[str]) -> str | None:
    """The field ``key`` was probably meant to be: the closest spelling of a field, or of one of
    its words (``ulr`` → ``base_url``)."""
    if match := difflib.get_close_matches(key, fields, n=1, cutoff=0.6):
        return match[0]
    words = {w: f for f in fields for w in f.split("_")}
    match = difflib.get_close_matches(key, list(words), n=1, cutoff=0.6)
    return words[match[0]] if match else None


def _resolve(config: Config, base: Path) -> Config:
    """Relative paths in a file mean relative to that file."""
    def absolute(p: Path) -> Path:
        return p if p.is_absolute() else base / p

    return config.model_copy(
        update={
            "warehouse": config.warehouse.model_copy(update={"path": absolute(config.warehouse.path)}),
            "collector": config.collector.model_copy(update={"db": absolute(config.collector.db)}),
            "digest": config.digest.model_copy(update={"folder": absolute(config.digest.folder)}),
            "sources": [
                s.model_copy(update={"path": absolute(path)}) if isinstance(path := getattr(s, "path", None), Path) else s
                for s in config.sources
            ],
        }
    )


def load(path: Path | None = None) -> Config:
    """The configuration in force (see the module docstring for where it comes from)."""
    if path is None and os.environ.get(ENV_CONFIG):
        path = Path(os.environ[ENV_CONFIG])
    if path is None and Path(DEFAULT_FILE).is_file():
        path = Path(DEFAULT_FILE)
    if path is None:
        return embedded_default()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format(exc, str(path))) from None
    return _resolve(config, path.resolve().parent)
