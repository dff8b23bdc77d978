"""The typed configuration: one TOML file, a section per stage; secrets from the environment.

:func:`load` finds and reads it (or returns the embedded default); every section is a frozen
pydantic model whose defaults are defined here once and used by the stages as they are.
"""

from ._base import ConfigError, Label, Strict, secret
from ._clusters import DEFAULT_HALF_LIFE_DAYS, ClusteringConfig, DemandConfig, EmbeddingConfig
from ._collector import CollectorConfig
from ._config import Config
from ._desk import DEFAULT_DESK_HOST, DEFAULT_DESK_PORT, DeskConfig
from ._digest import DEFAULT_SMTP_PORT, DigestConfig, EmailConfig, WebhookFormat
from ._drafts import DEFAULT_PROMPT_TOKENS, DraftsConfig, EvidenceLinks, LLMConfig
from ._flows import DEFAULT_SHARD_SIZE, FlowsConfig, Schedule
from ._ingest import (
    DEFAULT_BATCH_SIZE,
    ENV_HMAC_KEY,
    MIN_HMAC_KEY_CHARS,
    SAMPLE_HMAC_KEY,
    IngestConfig,
    PrivacyConfig,
    WarehouseConfig,
)
from ._loader import DEFAULT_FILE, ENV_CONFIG, embedded_default, load
from ._publish import GitHubConfig, KnownStatus
from ._sources import SERVICE_RULE, FileDropConfig, HttpCollectorConfig, SourceConfig, SqlTableConfig, is_service_name

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_DESK_HOST",
    "DEFAULT_DESK_PORT",
    "DEFAULT_FILE",
    "DEFAULT_HALF_LIFE_DAYS",
    "DEFAULT_PROMPT_TOKENS",
    "DEFAULT_SHARD_SIZE",
    "DEFAULT_SMTP_PORT",
    "ENV_CONFIG",
    "ENV_HMAC_KEY",
    "MIN_HMAC_KEY_CHARS",
    "SAMPLE_HMAC_KEY",
    "SERVICE_RULE",
    "ClusteringConfig",
    "CollectorConfig",
    "Config",
    "ConfigError",
    "DemandConfig",
    "DeskConfig",
    "DigestConfig",
    "DraftsConfig",
    "EmailConfig",
    "EmbeddingConfig",
    "EvidenceLinks",
    "FileDropConfig",
    "FlowsConfig",
    "GitHubConfig",
    "HttpCollectorConfig",
    "IngestConfig",
    "KnownStatus",
    "LLMConfig",
    "Label",
    "PrivacyConfig",
    "Schedule",
    "SourceConfig",
    "SqlTableConfig",
    "Strict",
    "WarehouseConfig",
    "WebhookFormat",
    "embedded_default",
    "is_service_name",
    "load",
    "secret",
]
