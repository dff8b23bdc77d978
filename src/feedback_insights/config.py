"""Configuration: one TOML file, typed; secrets come from environment variables.

Where it is read from: ``--config PATH``, else ``$FEEDBACK_INSIGHTS_CONFIG``, else
``./feedback-insights.toml`` when present, else the embedded default (the packaged sample data
into ``./feedback.duckdb``). Relative paths in a file are relative to that file.

A wrong key or value is a :class:`ConfigError` whose message names the key path, e.g.
``feedback-insights.toml: sources.1.path: field required``.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import quote

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from .dialects import CHOICES, DEFAULT_MAX_BYTES
from .resources import sample_dir

ENV_CONFIG = "FEEDBACK_INSIGHTS_CONFIG"
ENV_HMAC_KEY = "FEEDBACK_INSIGHTS_HMAC_KEY"
DEFAULT_FILE = "feedback-insights.toml"
#: The embedded default's key. It only pseudonymises the shipped sample: not a secret.
SAMPLE_HMAC_KEY = "feedback-insights-embedded-sample"


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the file and key."""


def secret(variable: str, where: str, what: str) -> str:
    """A secret from the environment, or a ConfigError saying which variable to set."""
    value = os.environ.get(variable)
    if not value:
        raise ConfigError(f"{where}: set {variable} to {what}")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WarehouseConfig(_Strict):
    path: Path = Path("feedback.duckdb")


class IngestConfig(_Strict):
    max_bytes: int = Field(DEFAULT_MAX_BYTES, ge=DEFAULT_MAX_BYTES, description="body limit; AFP allows only larger")
    batch_size: int = Field(10_000, ge=1, le=1_000_000)
    workers: int | None = Field(
        None, ge=0, le=64, description="worker processes for large batches; 0 = none; default: one per core"
    )


class PrivacyConfig(_Strict):
    """The key that pseudonymises accounts. Put it in $FEEDBACK_INSIGHTS_HMAC_KEY rather than
    in the file; the environment wins when both are set."""

    hmac_key: SecretStr | None = None

    def key(self) -> str:
        from_env = os.environ.get(ENV_HMAC_KEY)
        if from_env:
            return from_env
        if self.hmac_key is None or not self.hmac_key.get_secret_value():
            raise ConfigError(
                f"privacy.hmac_key: no key to pseudonymise accounts with; set {ENV_HMAC_KEY} "
                "(any long random string, kept the same across runs)"
            )
        return self.hmac_key.get_secret_value()


class EmbeddingConfig(_Strict):
    """The packaged all-MiniLM-L6-v2 model, on the CPU."""

    batch_size: int = Field(32, ge=1, le=1024, description="32 is the fastest measured on 2 cores")
    threads: int | None = Field(None, ge=1, le=256, description="torch threads; default one per usable core")


class ClusteringConfig(_Strict):
    """How reports become clusters (clustering.py says what each knob does; defaults measured
    by benchmarks/cluster_quality.py)."""

    pca_dimensions: int = Field(64, ge=2, le=1024)
    neighbours: int = Field(15, ge=2, le=200)
    min_cluster_size: int = Field(2, ge=2, le=100)
    min_samples: int = Field(2, ge=1, le=100)
    merge_similarity: float = Field(0.5, gt=-1, lt=1)
    join_centroid: float = Field(0.4, gt=-1, lt=1, description="cosine to the nearest centroid a report needs to join")
    join_nearest: float = Field(0.5, gt=-1, lt=1, description="… and to the nearest member of that cluster")
    min_cohesion: float = Field(0.42, gt=-1, lt=1, description="mean pairwise cosine below which a cluster dissolves")
    separation: float = Field(
        0.01, gt=-1, lt=1, description="… or how much more alike members must be than to their nearest outsiders"
    )
    smooth_from: int = Field(
        7, ge=1, le=10_000, description="smooth vectors when a typical first-pass cluster has more members than this"
    )
    smooth_keep: float = Field(0.3, ge=0, le=1, description="share of a report's own vector kept in each round")
    smooth_rounds: int = Field(2, ge=1, le=10)
    smoothed_merge_similarity: float = Field(0.75, gt=-1, lt=1)
    smoothed_separation: float = Field(0.03, gt=-1, lt=1)


class DemandConfig(_Strict):
    half_life_days: float = Field(14.0, gt=0, description="recency half-life of the ranking score")


class DigestConfig(_Strict):
    """Where the weekly digest goes."""

    folder: Path = Field(Path("digests"), description="digest-<week>.html and .md are written here")
    webhook_env: str | None = Field(None, description="environment variable holding a chat webhook URL")

    def webhook(self) -> str | None:
        return secret(self.webhook_env, "digest.webhook_env", "the webhook URL") if self.webhook_env else None


#: A GitHub label name (GitHub allows 1–50 characters).
Label = Annotated[str, Field(min_length=1, max_length=50)]
#: A schedule: a cron string, or seconds between runs.
Schedule = Annotated[str, Field(pattern=r"^\S+( \S+){4}$")] | Annotated[int, Field(ge=1)]


class FlowsConfig(_Strict):
    """When the Prefect flows run (declared here once: ``serve`` and ``prefect.yaml`` use these)
    and where their shards run."""

    ingest: Schedule = "*/15 * * * *"
    insights: Schedule = "0 * * * *"
    publish: Schedule = "30 * * * *"
    weekly_digest: Schedule = "0 8 * * 1"
    timezone: str = Field("UTC", description="time zone of the cron schedules, e.g. Europe/Berlin")
    task_runner: Literal["local", "dask"] = Field("local", description="where embedding and clustering shards run")
    dask_address: str | None = Field(None, description="an existing Dask scheduler (tcp://host:8786); unset: a LocalCluster")
    dask_workers: int = Field(2, ge=1, le=256, description="LocalCluster workers when no address is set")
    shard_size: int = Field(2000, ge=100, description="texts per embedding shard")

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as Europe/Berlin)") from None
        return value


_PLACEHOLDERS = ("request_id", "trace_id", "session_id", "message_id")


class EvidenceLinks(_Strict):
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


class DraftsConfig(_Strict):
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


class LLMConfig(_Strict):
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


KnownStatus = Literal["planned", "in_progress"]


class GitHubConfig(_Strict):
    """Where approved drafts are filed."""

    base_url: str = Field("https://api.github.com", pattern=r"^https?://")
    token_env: str = "GITHUB_TOKEN"
    repos: dict[str, str] = Field({}, description="service → owner/name")
    default_repo: str | None = Field(None, description="owner/name for services not in repos")
    marker_label: Label = Field("feedback-insights", description="label on every filed issue; finds them again")
    status_labels: dict[str, KnownStatus] = Field(
        {"planned": "planned", "in progress": "in_progress"}, description="issue label → known_issue status"
    )
    timeout: float = Field(15.0, gt=0)
    retries: int = Field(4, ge=0, le=10, description="retries of timeouts, rate limits and 5xx")
    backoff: float = Field(2.0, ge=0, description="first retry wait in seconds, doubled each time")
    seconds_between_writes: float = Field(1.0, ge=0, description="GitHub asks for at least 1 s")
    known_issue_prefix: str = Field("fi-cluster-", pattern=r"^[A-Za-z0-9_.:-]*$")

    @field_validator("repos")
    @classmethod
    def _repo_names(cls, value: dict[str, str]) -> dict[str, str]:
        for service, repo in value.items():
            _check_repo(repo, f"repos.{service}")
        return value

    @field_validator("default_repo")
    @classmethod
    def _default_repo(cls, value: str | None) -> str | None:
        return value if value is None else _check_repo(value, "default_repo")

    def repo_for(self, service: str | None) -> str | None:
        return self.repos.get(service or "", self.default_repo)

    def token(self) -> str:
        return secret(self.token_env, "github.token_env", "a GitHub token that may write issues")


def _check_repo(value: str, where: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", value):
        raise ValueError(f"{where}: {value!r} is not owner/name")
    return value


class CollectorConfig(_Strict):
    """The collector server (``feedback-insights collector serve``). Keys are written as
    ``sha256:<hex>`` (``feedback-insights collector hash-key`` prints one), never in clear."""

    db: Path = Path("collector.sqlite")
    service: str | None = Field(None, description="service name given to records submitted here")
    auth: Literal["none", "optional", "required"] = "optional"
    max_bytes: int = Field(DEFAULT_MAX_BYTES, ge=DEFAULT_MAX_BYTES)
    api_keys: dict[str, str] = Field({}, description="agents' API key hash → account")
    ingest_keys: list[str] = Field([], description="hashes of the services' ingest keys (POST /v1/records)")
    pipeline_keys: list[str] = Field([], description="hashes of the pipeline's keys (pull, known issues)")
    rate_limit_per_account: int = Field(600, ge=0, description="submissions per minute; 0 = no limit")
    rate_limit_per_ip: int = Field(1200, ge=0, description="submissions per minute; 0 = no limit")

    @field_validator("api_keys", "ingest_keys", "pipeline_keys")
    @classmethod
    def _hashed(cls, value: dict[str, str] | list[str]) -> dict[str, str] | list[str]:
        for key in value:
            if not (key.startswith("sha256:") and len(key) == 71):
                raise ValueError("keys are stored hashed: write sha256:<64 hex digits> (collector hash-key)")
        return value


class _SourceBase(_Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$", description="the collector name records carry")
    dialect: str = "auto"
    service: str | None = Field(None, description="service for dialects that do not name one")

    @field_validator("dialect")
    @classmethod
    def _known_dialect(cls, value: str) -> str:
        if value not in CHOICES:
            raise ValueError(f"must be one of: {', '.join(CHOICES)}")
        return value


class FileDropConfig(_SourceBase):
    """A folder (or one file) of JSON Lines, JSON arrays and Parquet files."""

    kind: Literal["files"]
    path: Path
    patterns: list[str] = ["*.jsonl", "*.ndjson", "*.json", "*.parquet"]


class SqlTableConfig(_SourceBase):
    """In-session ``agent_feedback`` rows in a SQLite or DuckDB file."""

    kind: Literal["sql"]
    path: Path
    table: str = Field("agent_feedback", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    dialect: str = "session"
    lookback_seconds: int = Field(600, ge=0, description="re-read this far behind the cursor for late commits")
    write_back: bool = Field(False, description="mark rows filed, with issue_url, once their issue is filed")


class HttpCollectorConfig(_SourceBase):
    """A collector's pull API (``GET /v1/records``), read with a pipeline key."""

    kind: Literal["http"]
    url: str = Field(pattern=r"^https?://")
    key_env: str = Field(description="environment variable that holds the pipeline key")
    page_size: int = Field(500, ge=1, le=1000)
    retries: int = Field(4, ge=0, le=10, description="retries of 429, 5xx and connection failures")
    known_issues: bool = Field(True, description="PUT known issues back to this collector")

    def key(self) -> str:
        return secret(self.key_env, f"source {self.name!r}", "this collector's pipeline key")


SourceConfig = Annotated[FileDropConfig | SqlTableConfig | HttpCollectorConfig, Field(discriminator="kind")]


class Config(_Strict):
    warehouse: WarehouseConfig = WarehouseConfig()
    ingest: IngestConfig = IngestConfig()
    privacy: PrivacyConfig = PrivacyConfig()
    collector: CollectorConfig = CollectorConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    clustering: ClusteringConfig = ClusteringConfig()
    demand: DemandConfig = DemandConfig()
    drafts: DraftsConfig = DraftsConfig()
    llm: LLMConfig | None = None
    github: GitHubConfig = GitHubConfig()
    digest: DigestConfig = DigestConfig()
    flows: FlowsConfig = FlowsConfig()
    sources: list[SourceConfig] = []

    def check_secrets(self, publishing: bool = False) -> None:
        """Every secret the configured stages will need is in the environment: a scheduled or
        long run fails at the start with the one line that says which, not half-way."""
        self.privacy.key()
        for source in self.sources:
            if isinstance(source, HttpCollectorConfig):
                source.key()
        if self.llm:
            self.llm.key()
        if publishing:
            self.github.token()
        self.digest.webhook()

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: list[SourceConfig]) -> list[SourceConfig]:
        names = [s.name for s in sources]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"source names must be unique; repeated: {', '.join(duplicates)}")
        return sources


def embedded_default(warehouse: Path = Path("feedback.duckdb")) -> Config:
    """The sample data shipped with the project, into a local DuckDB file."""
    sample = sample_dir()
    return Config(
        warehouse=WarehouseConfig(path=warehouse),
        privacy=PrivacyConfig(hmac_key=SecretStr(SAMPLE_HMAC_KEY)),
        sources=[
            FileDropConfig(
                kind="files",
                name="sample",
                path=sample,
                patterns=["afp_*.jsonl", "afs.jsonl", "sep2369.jsonl", "rfc026.json"],
            ),
            SqlTableConfig(kind="sql", name="sample-session", path=sample / "session.sqlite", service="pags-console"),
        ],
    )


def _format(error: ValidationError, origin: str) -> str:
    first = error.errors()[0]
    path = ".".join(str(p) for p in first["loc"] if p not in ("files", "sql", "http"))
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
                s.model_copy(update={"path": absolute(s.path)}) if hasattr(s, "path") else s for s in config.sources
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
