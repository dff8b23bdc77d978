"""Where a flow's shards run: Prefect's threads, or a Dask cluster."""

from __future__ import annotations

import socket
from typing import Any

from ..config import ConfigError, FlowsConfig

#: How long the configured Dask scheduler has to accept a connection before the flow gives up.
PROBE_SECONDS = 5.0


def task_runner(settings: FlowsConfig, origin: str = "the configuration") -> Any:
    """The configured task runner: Prefect's threads, or Dask (an existing scheduler's address,
    else a LocalCluster of ``dask_workers`` processes). A scheduler that does not answer is a
    :class:`ConfigError` of one line naming ``origin`` and the key: Dask would wait out its own
    timeout and fail the run with a page of tracebacks."""
    if settings.task_runner == "local":
        from prefect.task_runners import ThreadPoolTaskRunner

        # One shard at a time: each embedding shard already uses every core through torch.
        return ThreadPoolTaskRunner(max_workers=1)
    if settings.dask_address:
        _probe(settings.dask_address, origin)
    from prefect_dask import DaskTaskRunner

    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": settings.dask_workers, "threads_per_worker": 1})


def _probe(address: str, origin: str) -> None:
    """Connect to the scheduler's port once (the address is checked when loaded)."""
    host, _, port = address.split("://", 1)[1].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS).close()
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__).lower()
        raise ConfigError(f"{origin}: flows.dask_address: no Dask scheduler answers at {address} ({reason}); "
                          "start it, or correct the address") from None
