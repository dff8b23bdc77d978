"""Where the weekly digest goes."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ._base import Strict, secret


class DigestConfig(Strict):
    """Where the weekly digest goes."""

    folder: Path = Field(Path("digests"), description="digest-<week>.html and .md are written here")
    webhook_env: str | None = Field(None, description="environment variable holding a chat webhook URL")

    def webhook(self) -> str | None:
        return secret(self.webhook_env, "digest.webhook_env", "the webhook URL") if self.webhook_env else None
