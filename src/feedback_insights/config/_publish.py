"""Where approved drafts are filed: the GitHub repositories and how issue state reads back."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from ._base import Label, Strict, secret

KnownStatus = Literal["planned", "in_progress"]


class GitHubConfig(Strict):
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
    writes_per_minute: int = Field(80, ge=1, description="GitHub's secondary limit on content-creating requests")
    writes_per_hour: int = Field(500, ge=1, description="GitHub's secondary limit on content-creating requests")
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
