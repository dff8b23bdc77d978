"""When the Prefect flows run and where their shards run."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from ._base import Strict

#: Texts per embedding shard, when a flow runs the shards as tasks.
DEFAULT_SHARD_SIZE = 2000
#: A schedule: a cron string, or seconds between runs.
Schedule = Annotated[str, Field(pattern=r"^\S+( \S+){4}$")] | Annotated[int, Field(ge=1)]


class FlowsConfig(Strict):
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
    shard_size: int = Field(DEFAULT_SHARD_SIZE, ge=100, description="texts per embedding shard")

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as Europe/Berlin)") from None
        return value
