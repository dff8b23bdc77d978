"""Where records are stored, how they are ingested, and the key that pseudonymises accounts."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from ..core import DEFAULT_MAX_BYTES
from ._base import ConfigError, Strict

ENV_HMAC_KEY = "FEEDBACK_INSIGHTS_HMAC_KEY"
#: Records per batch: one transaction, one unit of work for a worker process.
DEFAULT_BATCH_SIZE = 10_000
#: The embedded default's key. It only pseudonymises the shipped sample: not a secret.
SAMPLE_HMAC_KEY = "feedback-insights-embedded-sample"
#: The shortest key accepted: 32 characters of a random string (``secrets.token_urlsafe(32)``
#: gives 43) cannot be guessed from the pseudonyms, the way a word or a short phrase can.
MIN_HMAC_KEY_CHARS = 32


def check_key(key: str, where: str) -> str:
    """``key``, or a ConfigError naming ``where`` it came from when it is too short to be safe."""
    if len(key) < MIN_HMAC_KEY_CHARS:
        raise ConfigError(
            f"{where}: the pseudonymisation key is {len(key)} character{'' if len(key) == 1 else 's'} long; "
            f"it needs at least {MIN_HMAC_KEY_CHARS} "
            "(a random string, e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return key


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
    in the file; the environment wins when both are set. Either must be at least
    :data:`MIN_HMAC_KEY_CHARS` characters: every pseudonym, and the erasure ledger, is an HMAC
    under it, so a short one could be found by trying keys against them."""

    hmac_key: SecretStr | None = None

    @field_validator("hmac_key")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and value.get_secret_value():
            try:
                check_key(value.get_secret_value(), "privacy.hmac_key")
            except ConfigError as exc:
                raise ValueError(str(exc).removeprefix("privacy.hmac_key: ")) from None
        return value

    def key_source(self) -> str:
        """Where :meth:`key` takes the key from, as an error names it."""
        return f"${ENV_HMAC_KEY}" if os.environ.get(ENV_HMAC_KEY) else "privacy.hmac_key"

    def key(self) -> str:
        from_env = os.environ.get(ENV_HMAC_KEY)
        if from_env:
            return check_key(from_env, f"${ENV_HMAC_KEY}")
        if self.hmac_key is None or not self.hmac_key.get_secret_value():
            raise ConfigError(
                f"privacy.hmac_key: no key to pseudonymise accounts with; set {ENV_HMAC_KEY} "
                f"(a random string of at least {MIN_HMAC_KEY_CHARS} characters, kept the same across runs)"
            )
        return self.hmac_key.get_secret_value()
