"""The whole configuration: one section per stage, and every configured source."""

from __future__ import annotations

from typing import Annotated

from pydantic import PrivateAttr, SerializeAsAny, WrapValidator, field_validator

from ._base import Strict
from ._clusters import ClusteringConfig, DemandConfig, EmbeddingConfig
from ._collector import CollectorConfig
from ._desk import DeskConfig
from ._digest import DigestConfig
from ._drafts import DraftsConfig, LLMConfig
from ._flows import FlowsConfig
from ._ingest import IngestConfig, PrivacyConfig, WarehouseConfig
from ._publish import GitHubConfig
from ._sources import SourceConfig, by_kind


class Config(Strict):
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
    desk: DeskConfig = DeskConfig()
    flows: FlowsConfig = FlowsConfig()
    #: Each a registered kind's section model (serialised as that model, not as the base).
    sources: list[SerializeAsAny[Annotated[SourceConfig, WrapValidator(by_kind)]]] = []
    #: The file it was read from (set by :func:`load`), for errors found after loading.
    _origin: str = PrivateAttr("the embedded default")

    @property
    def origin(self) -> str:
        """Where this configuration came from, as an error names it: the file's path, or "the
        embedded default"; errors found after loading (a warehouse made with another key, a
        scheduler that does not answer) start with it, as loading errors do."""
        return self._origin

    def read_from(self, origin: str) -> Config:
        """This configuration, as read from ``origin`` (a copy: a configuration never changes)."""
        copy = self.model_copy()
        copy._origin = origin
        return copy

    def check_secrets(self, publishing: bool = False) -> None:
        """Every secret the configured stages will need is in the environment: a scheduled or
        long run fails at the start with the one line that says which, not half-way."""
        self.privacy.key()
        for source in self.sources:
            source.check_secrets()
        if self.llm:
            self.llm.key()
        if publishing:
            self.github.token()
        self.digest.check_secrets()

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: list[SourceConfig]) -> list[SourceConfig]:
        names = [s.name for s in sources]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"source names must be unique; repeated: {', '.join(duplicates)}")
        return sources
