"""Where a flow's shards run: Prefect's threads, or a Dask cluster."""

from __future__ import annotations

from typing import Any

from ..config import FlowsConfig


def task_runner(settings: FlowsConfig) -> Any:
    """The configured task runner: Prefect's threads, or Dask (an existing scheduler's address,
    else a LocalCluster of ``dask_workers`` processes)."""
    if settings.task_runner == "local":
        from prefect.task_runners import ThreadPoolTaskRunner

        # One shard at a time: each embedding shard already uses every core through torch.
        return ThreadPoolTaskRunner(max_workers=1)
    from prefect_dask import DaskTaskRunner

    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": settings.dask_workers, "threads_per_worker": 1})
