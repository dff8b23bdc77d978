"""The review desk (``feedback-insights desk``): where it listens and who is reviewing."""

from __future__ import annotations

import os
from typing import ClassVar

from pydantic import Field, field_validator

from ._base import Strict

#: Where the desk listens unless told otherwise: this machine only, so no token is needed.
DEFAULT_DESK_HOST = "127.0.0.1"
DEFAULT_DESK_PORT = 8790


class DeskConfig(Strict):
    """The review desk's address and audit name. On an address other than the loopback one the
    desk refuses to start unless the token variable is set; reviewers then log in with it."""

    #: Accounts that are nobody in particular: no decision is recorded as one of them.
    SHARED_ACCOUNTS: ClassVar[frozenset[str]] = frozenset({"root", "admin", "administrator"})

    host: str = Field(DEFAULT_DESK_HOST, min_length=1, description="address to bind (--host overrides)")
    port: int = Field(DEFAULT_DESK_PORT, ge=1, le=65535, description="port to listen on (--port overrides)")
    token_env: str = Field(
        "FEEDBACK_INSIGHTS_DESK_TOKEN", min_length=1,
        description="environment variable holding the login token (required off 127.0.0.1)",
    )
    reviewer: str | None = Field(
        None, min_length=1, max_length=64,
        description="the person decisions are recorded as without a login (default: $FEEDBACK_INSIGHTS_USER or the "
                    "login name; when that is root, the desk asks each reviewer's name)",
    )
    session_hours: float = Field(12.0, gt=0, le=24 * 30, description="how long a login lasts")
    # Slow clients: uvicorn bounds none of these by itself (core/serving.py). A browser sends a
    # page's request at once; a desk serves a few reviewers, each with a handful of connections.
    header_timeout: float = Field(10.0, gt=0, description="seconds to send a request line and headers, from "
                                  "connecting (or from the next request's first byte on a kept-alive connection)")
    body_timeout: float = Field(30.0, gt=0, description="seconds to send a form once its headers are in")
    max_connections: int = Field(256, ge=1, description="open connections at once (lowered to what the descriptor "
                                 "limit allows); one more closes the longest-waiting idle or unfinished one, or is "
                                 "answered 503 when all are busy")

    @field_validator("reviewer")
    @classmethod
    def _a_person(cls, value: str | None) -> str | None:
        """A decision names the person who made it: a shared account's name says nobody."""
        if value is not None and value.strip().lower() in cls.SHARED_ACCOUNTS:
            raise ValueError(f"{value!r} is a shared account: name the person reviewing (or leave it out, and the "
                             "desk asks each reviewer's name)")
        return value

    def token(self) -> str | None:
        """The login token from the environment (None: unset or empty, no login)."""
        return os.environ.get(self.token_env) or None
