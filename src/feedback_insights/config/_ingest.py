"""Where records are stored, how they are ingested, and the key that pseudonymises accounts."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr

from ..core import DEFAULT_MAX_BYTES
from ._base import ConfigError, Strict

ENV_HMAC_KEY = "FEEDBACK_INSIGHTS_HMAC_KEY"
#: Records per batch: one transaction, one unit of work for a worker process.
DEFAULT_BATCH_SIZE = 10_000
#: The embedded default's key. It only pseudonymises the shipped sample: not a secret.
SAMPLE_HMAC_KEY = "feedback-insights-embedded-sample"


class WarehouseConfig(Strict):
    path: Path = Path("feedback.duckdb")
    lock_wait: float = Field(
        30.0, ge=0, description="seconds a person's command waits for the flow holding the warehouse before giving up"
    )


class IngestConfig(Strict):
    max_bytes: int = Field(DEFAULT_MAX_BYTES, ge=DEFAULT_MAX_BYTES, description="body limit; AFP allows only larger")
    batch_size: int = Field(DEFAULT_BATCH_SIZE, ge=1, le=1_000_000)
    workers: int | None = Field(
        None, ge=0, le=64, description="worker processes for large batches; 0 = none; default: one per core"
    )


class PrivacyConfig(Strict):
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
