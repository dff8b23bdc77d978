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
import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, SecretStr, ValidationError
from pydantic_core import ErrorDetails

from ..core import SOURCES, sample_dir
from ._base import ConfigError
from ._config import Config
from ._ingest import ENV_HMAC_KEY, SAMPLE_HMAC_KEY, PrivacyConfig, WarehouseConfig, check_key
from ._sources import FileDropConfig, SqlTableConfig

ENV_CONFIG = "FEEDBACK_INSIGHTS_CONFIG"
DEFAULT_FILE = "feedback-insights.toml"


#: When the sample's bare AFP submissions (which carry no time) count as received: the close
#: of its last week, Sunday 2026-11-29, so that the digest's weeks are the sample's Mon–Sun weeks.
SAMPLE_DELIVERED_AT = datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC)


def embedded_default(warehouse: Path = Path("feedback.duckdb")) -> Config:
    """The sample data shipped with the project, into a local DuckDB file.

    Its bare AFP submissions name neither service nor time, so they are a source of their own
    that says both: the HTTP API's endpoints are paths, the MCP server's tools are names. Its
    in-session rows are owner-private, as the platform's are, so the default run shows the policy.
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
            SqlTableConfig(kind="sql", name="sample-session", path=sample / "session.sqlite", service="pags-console",
                           private=True),
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
    """The configuration in force (see the module docstring for where it comes from). Every
    mistake found is a :class:`ConfigError` of one line (one per problem) naming the file and
    the key; nothing wrong is left for a stage to trip over later."""
    if path is None and os.environ.get(ENV_CONFIG):
        path = Path(os.environ[ENV_CONFIG])
    if path is None and Path(DEFAULT_FILE).is_file():
        path = Path(DEFAULT_FILE)
    if path is None:
        config = embedded_default()
    else:
        text = _read(path)
        _check_depth(text, path)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        try:
            config = Config.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_format(exc, str(path))) from None
        config = _resolve(config, path.resolve().parent).read_from(str(path))
    _check_paths(config)
    if from_env := os.environ.get(ENV_HMAC_KEY):
        check_key(from_env, f"${ENV_HMAC_KEY}")
    return config


#: The largest configuration file read: a real one is a few kilobytes.
MAX_CONFIG_BYTES = 1 << 20
#: How deeply arrays and inline tables may nest in it: a real one nests three or four levels
#: (``sources``' tables, ``service_by_tool``); TOML's reader recurses for each level.
MAX_DEPTH = 16
_UTF8_BOM = b"\xef\xbb\xbf"


def _read(path: Path) -> str:
    """The file's text; what keeps it from being read, in words that name it."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a configuration file (name the .toml file)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES // 1024} KiB; a configuration file is a few kilobytes")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in raw[:4]:
        raise ConfigError(f"{path}: is UTF-16 (or UTF-32) text; TOML files are UTF-8: save it as UTF-8")
    raw = raw.removeprefix(_UTF8_BOM)  # the byte-order mark some editors write: UTF-8 all the same
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: line {line}: byte 0x{raw[exc.start]:02x} is not UTF-8; TOML files are UTF-8: "
                          "save it as UTF-8") from None


def _check_depth(text: str, path: Path) -> None:
    """Refuse arrays and inline tables nested deeper than :data:`MAX_DEPTH`, naming the key,
    before TOML's recursive reader meets them (it would stop with a RecursionError that names
    neither file nor key). Strings and comments are skipped: brackets in them are text."""
    depth, line, table, key = 0, 1, "", ""
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            line, line_start = line + 1, True
        elif c in " \t\r":
            pass
        elif c == "#":
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        elif depth == 0 and line_start and (found := _LINE_START.match(text, i)):
            table, key = (found["header"].strip(), "") if found["header"] is not None else (table, found["key"].strip())
            i, line_start = found.end(), False
            continue
        elif c in "\"'":
            end = _string_end(text, i)
            line += text.count("\n", i, end)
            i, line_start = end, False
            continue
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                where = ".".join(part for part in (table, key) if part) or "(top level)"
                raise ConfigError(f"{path}: line {line}: {where}: nested more than {MAX_DEPTH} levels deep "
                                  "(arrays and inline tables in one another)")
        elif c in "]}":
            depth = max(depth - 1, 0)
        line_start = line_start and c in " \t\r\n"
        i += 1


#: What a line at the top level starts with: a table's header, or a key and its ``=``.
_LINE_START = re.compile(r"\[\[?(?P<header>[^\]\n]*)\]\]?|(?P<key>[^=\n\[{#]+?)[ \t]*=")


def _string_end(text: str, i: int) -> int:
    """Where the string starting at ``i`` ends (after its closing quote; the text's end if it
    never closes: TOML's reader says so)."""
    quote = text[i]
    if text.startswith(quote * 3, i):
        end = text.find(quote * 3, i + 3)
        return len(text) if end < 0 else end + 3
    j = i + 1
    while j < len(text) and text[j] not in (quote, "\n"):
        j += 2 if quote == '"' and text[j] == "\\" else 1
    return j + 1


def _check_paths(config: Config) -> None:
    """A folder where a file is meant, a file where a folder is, and a warehouse in a folder
    that does not exist (a typo would otherwise start an empty warehouse somewhere new)."""
    origin = config.origin
    warehouse = config.warehouse.path
    if warehouse.is_dir():
        raise ConfigError(f"{origin}: warehouse.path: {warehouse} is a folder; name the warehouse file in it, "
                          f"e.g. {warehouse / 'feedback.duckdb'}")
    if not warehouse.parent.is_dir():
        raise ConfigError(f"{origin}: warehouse.path: the folder {warehouse.parent} does not exist; create it, "
                          "or name a warehouse file in a folder that exists")
    if config.collector.db.is_dir():
        raise ConfigError(f"{origin}: collector.db: {config.collector.db} is a folder; name the collector's "
                          "SQLite file in it")
    if config.digest.folder.exists() and not config.digest.folder.is_dir():
        raise ConfigError(f"{origin}: digest.folder: {config.digest.folder} is a file; name a folder for the digests")
