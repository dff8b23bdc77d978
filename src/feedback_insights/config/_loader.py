"""Where the configuration is read from, and the embedded default.

``--config PATH``, else ``$FEEDBACK_INSIGHTS_CONFIG``, else ``./feedback-insights.toml`` when
present, else the embedded default (the packaged sample data into ``./feedback.duckdb``).
Relative paths in a file are relative to that file. A wrong key or value is a
:class:`ConfigError` whose message names the key path, e.g.
``feedback-insights.toml: sources.1.path: field required``.
"""

from __future__ import annotations

import os
import tomllib
from datetime import UTC, datetime
from pathlib import Path

from pydantic import SecretStr, ValidationError

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
    first = error.errors()[0]
    loc = list(first["loc"])
    if len(loc) > 2 and loc[0] == "sources" and loc[2] in SOURCES.names():
        del loc[2]  # the union member a [[sources]] table was validated as: its kind, not a key
    path = ".".join(str(p) for p in loc)
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{origin}: {path}: {message[0].lower()}{message[1:]}{more}"


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
