"""Where the weekly digest goes: files, a chat webhook, an email."""

from __future__ import annotations

import ipaddress
from email.utils import parseaddr
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from ._base import Strict, secret

#: ``[digest] webhook_format``: what the chat webhook is sent (the digest's WEBHOOK_FORMATS).
WebhookFormat = Literal["slack", "markdown"]
#: The SMTP submission port (STARTTLS), what most relays expect.
DEFAULT_SMTP_PORT = 587


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _address(value: str, where: str) -> str:
    """One mailbox ("pm@example.com" or "PMs <pm@example.com>"); never a line break, which
    would let the value write headers of its own."""
    name, address = parseaddr(value)
    if "\n" in value or "\r" in value or "@" not in address or (name == "" and address != value.strip()):
        raise ValueError(f"{where}: {value!r} is not an email address")
    return value.strip()


class EmailConfig(Strict):
    """The SMTP relay the weekly digest is mailed through. The password is read from the
    environment variable ``password_env`` names, so the file never holds it."""

    model_config = ConfigDict(**Strict.model_config, populate_by_name=True)

    host: str = Field(min_length=1, description="SMTP server")
    port: int = Field(DEFAULT_SMTP_PORT, ge=1, le=65535)
    starttls: bool = Field(True, description="upgrade the connection with STARTTLS before anything is sent")
    sender: str = Field(alias="from", description="the From address")
    to: list[str] = Field(min_length=1, description="recipients")
    username: str | None = Field(None, min_length=1, description="SMTP login; needs password_env")
    password_env: str | None = Field(None, min_length=1, description="environment variable holding the SMTP password")
    ca_file: Path | None = Field(None, description="CA bundle for the server's certificate (default: the system's)")
    timeout: float = Field(30.0, gt=0, description="seconds to wait for the server")

    @field_validator("sender")
    @classmethod
    def _sender(cls, value: str) -> str:
        return _address(value, "digest.email.from")

    @field_validator("to")
    @classmethod
    def _recipients(cls, value: list[str]) -> list[str]:
        return [_address(v, "digest.email.to") for v in value]

    @model_validator(mode="after")
    def _login(self) -> EmailConfig:
        if (self.username is None) != (self.password_env is None):
            raise ValueError("digest.email: username and password_env go together")
        if self.username and not self.starttls and not _loopback(self.host):
            raise ValueError(f"digest.email: refusing to send the SMTP password to {self.host} unencrypted; "
                             "set starttls = true")
        return self

    def password(self) -> str | None:
        """The SMTP password from the environment (None without a login)."""
        if self.password_env is None:
            return None
        return secret(self.password_env, "digest.email.password_env", "the SMTP password")


class DigestConfig(Strict):
    """Where the weekly digest goes."""

    folder: Path = Field(Path("digests"), description="digest-<week>.html and .md are written here")
    webhook_env: str | None = Field(None, description="environment variable holding a chat webhook URL")
    webhook_format: WebhookFormat = Field(
        "slack", description="slack: Slack's mrkdwn; markdown: CommonMark, for Mattermost, Discord, Teams …")
    desk_url: str | None = Field(
        None, pattern=r"^https?://[^\s\"'<>|()]+$",
        description="the review desk's address as readers reach it; cards then link to its pages")
    email: EmailConfig | None = None

    @field_validator("desk_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else value

    def webhook(self) -> str | None:
        return secret(self.webhook_env, "digest.webhook_env", "the webhook URL") if self.webhook_env else None

    def check_secrets(self) -> None:
        """The webhook URL and the SMTP password are in the environment, if configured."""
        self.webhook()
        if self.email:
            self.email.password()
