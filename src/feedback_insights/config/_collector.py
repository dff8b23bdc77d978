"""The collector server's section (``feedback-insights collector serve``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ..core import DEFAULT_MAX_BYTES
from ._base import Strict


class CollectorConfig(Strict):
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
    rate_limit_per_ip: int = Field(1200, ge=0,
                                   description="submissions and failed authentications per minute; 0 = no limit")
    known_issue_wait: float = Field(0.5, gt=0, le=30, description="seconds a submission waits for its vector (the "
                                    "embedder's backlog) before it is matched to known issues by record id and key "
                                    "terms only")
    # Slow clients: uvicorn bounds none of these by itself (collector/_server.py).
    header_timeout: float = Field(10.0, gt=0, description="seconds to send a request line and headers, from "
                                  "connecting (or from the next request's first byte on a kept-alive connection)")
    body_timeout: float = Field(30.0, gt=0, description="seconds to send a request body once its headers are in")
    keep_alive_timeout: int = Field(5, ge=1, description="seconds an idle kept-alive connection stays open")
    max_connections: int = Field(512, ge=1, description="open connections at once; one more closes the longest-waiting "
                                 "idle or unfinished one, or is answered 503 when all are busy")

    @field_validator("api_keys", "ingest_keys", "pipeline_keys")
    @classmethod
    def _hashed(cls, value: dict[str, str] | list[str]) -> dict[str, str] | list[str]:
        for key in value:
            if not (key.startswith("sha256:") and len(key) == 71):
                raise ValueError("keys are stored hashed: write sha256:<64 hex digits> (collector hash-key)")
        return value
