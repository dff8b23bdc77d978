"""Prefect flows: schedules, retries and logging around the library's stages, no logic of
their own. Imported only by the commands that orchestrate (``run``, ``serve``): Prefect costs
about 2 s to import.

* ``ingest``: pull every configured source (scrubbing and pseudonymising happen here: raw text
  is never stored, so nothing later could scrub it).
* ``insights``: signals → embed → cluster → demand → drafts. Embedding and clustering shards run
  on the configured task runner: the flow's own threads, or a Dask cluster.
* ``publish``: approved drafts → GitHub; issue state → known_issue → collectors; write-back.
* ``weekly-digest``: the digest of the last complete week, written (and posted) as configured.

Logs say what each stage did, in counts; never a report's text. A stage that did its work but
for a part that failed (a source down, the webhook unreachable) raises :class:`StageFailed`,
which carries what it did, so that ``run`` can say both.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from prefect import Task, flow, get_run_logger, task, unmapped
from prefect.cache_policies import NO_CACHE
from prefect.schedules import Cron, Interval, Schedule

from ..config import Config, ConfigError, FlowsConfig, load
from ..warehouse import exclusive
from ._local_server import LocalServer, ServerError, interrupted_if_gone, local_server, stop_on_signals
from ._runners import task_runner

if TYPE_CHECKING:
    from ..digest import Digest, Written

P = ParamSpec("P")
R = TypeVar("R")

#: Flow name → the [flows] setting that schedules it.
SCHEDULE_SETTING = {"ingest": "ingest", "insights": "insights", "publish": "publish", "weekly-digest": "weekly_digest"}


class StageFailed(RuntimeError):
    """A flow did its work but for a part that failed: ``done`` is what it would have returned
    (its summary), the message what failed. Prefect retries it as any failure."""

    def __init__(self, reason: str, done: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.done = done

    def __reduce__(self) -> tuple[Any, ...]:  # Prefect may keep a failure's exception pickled
        return type(self), (self.reason, self.done)


def _config(config: str | None) -> Config:
    return load(Path(config) if config else None)


def _turn(cfg: Config, flow_name: str) -> AbstractContextManager[None]:
    """The warehouse, after whoever works on it now (another flow, a maintainer's command):
    a flow waits as long as it takes, and says once, as a warning, whom it waits for."""

    def waiting(holder: str) -> None:
        get_run_logger().warning("waiting for %s to finish with the warehouse", holder)

    return exclusive(cfg.warehouse.path, f"the {flow_name} flow", on_wait=waiting)


def _retrying(stage: Task[P, R], retries: bool) -> Task[P, R]:
    """``run`` wants an answer now (retries off); a schedule can wait for a collector to come back."""
    return stage if retries else stage.with_options(retries=0)


def _not_a_config_error(task: Task, task_run: Any, state: Any) -> bool:
    """A wrong configuration does not mend itself: fail at once instead of retrying."""
    return not isinstance(state.result(raise_on_failure=False), ConfigError)


#: Network stages retry after 30 s, then 2 min, then 8 min (their clients retry briefly first).
NETWORK_RETRIES: dict[str, Any] = {"retries": 3, "retry_delay_seconds": [30, 120, 480], "retry_condition_fn": _not_a_config_error}


@task(name="pull sources", cache_policy=NO_CACHE, **NETWORK_RETRIES)
def pull_sources(cfg: Config) -> dict[str, Any]:
    from ..ingest import ingest
    from ..warehouse import Warehouse

    with Warehouse(cfg.warehouse.path) as warehouse:
        summary = ingest(cfg, warehouse)
    if summary.errors:  # retried: a collector may be back soon
        raise StageFailed("; ".join(summary.errors), {"line": summary.line()})
    get_run_logger().info("ingest: %s", summary.line())
    return {"line": summary.line()}


@flow(name="ingest")
def ingest_flow(config: str | None = None, retries: bool = True) -> dict[str, Any]:
    cfg = _config(config)
    with _turn(cfg, "ingest"):
        return _retrying(pull_sources, retries)(cfg)


@task(name="signals", cache_policy=NO_CACHE)
def score(cfg: Config) -> int:
    from ..signals import score_new_records
    from ..warehouse import Warehouse

    with Warehouse(cfg.warehouse.path) as warehouse:
        scored = score_new_records(warehouse)
    get_run_logger().info("signals: scored %d new records", scored)
    return scored


@task(name="shard", cache_policy=NO_CACHE)
def run_shard(fn: Callable[[Any], Any], item: Any) -> Any:
    """One shard of embedding or clustering, wherever the task runner puts it."""
    return fn(item)


def on_task_runner(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """The library's ``map_shards`` as Prefect tasks: one task per shard, results in order."""
    futures = run_shard.map(unmapped(fn), items)
    return [future.result() for future in futures]


def cluster(cfg: Config) -> dict[str, str]:
    """Not a task itself: its shards are the tasks, submitted from the flow to its runner."""
    from ..clusters import cluster_assist, cluster_new_records, embedder_for
    from ..drafts import merge_clusters
    from ..warehouse import Warehouse

    def merge(wh: Warehouse, into: int, other: int, actor: str, reason: str) -> None:
        """A merge the LLM judged right reaches the drafts as a maintainer's would."""
        merge_clusters(cfg, wh, into, other, actor, reason)

    with Warehouse(cfg.warehouse.path) as warehouse, cluster_assist(cfg.llm, merge=merge) as assist:
        run = cluster_new_records(
            warehouse, embedder_for(cfg.embedding), cfg.clustering,
            map_shards=on_task_runner, shard_size=cfg.flows.shard_size, assist=assist,
        )
    logger = get_run_logger()
    logger.info("clusters: %s", run.line("reports"))
    logger.info("goal themes: %s", run.line("goals"))
    lines = {"reports": run.line("reports"), "goals": run.line("goals")}
    if assist:
        (logger.warning if assist.assistant.failure else logger.info)("%s", assist.line())
        lines["llm"] = assist.line()
    return lines


@task(name="draft issues", cache_policy=NO_CACHE, **NETWORK_RETRIES)
def draft(cfg: Config) -> str:
    from ..drafts import ChatClient, draft_clusters
    from ..warehouse import Warehouse

    client = ChatClient(cfg.llm) if cfg.llm else None
    try:
        with Warehouse(cfg.warehouse.path) as warehouse:
            run = draft_clusters(cfg, warehouse, client)
    finally:
        if client:
            client.close()
    get_run_logger().info("drafts: %s", run.line())
    return run.line()


@flow(name="insights")
def insights_flow(config: str | None = None, retries: bool = True) -> dict[str, Any]:
    """Reads the configuration, then runs the stages as a subflow on the configured task
    runner: a deployment loads this flow by name, so the runner cannot be fixed in advance."""
    cfg = _config(config)
    with _turn(cfg, "insights"):
        return insights_stages.with_options(task_runner=task_runner(cfg.flows, cfg.origin))(config, retries)


@flow(name="insights-stages")
def insights_stages(config: str | None = None, retries: bool = True) -> dict[str, Any]:
    """Takes the configuration's path, not the configuration: flow parameters are stored by
    the Prefect API, and the configuration holds account names and secrets."""
    cfg = _config(config)
    done: dict[str, Any] = {}
    try:
        done["signals"] = score(cfg)
        done.update(cluster(cfg))
        done["drafts"] = _retrying(draft, retries)(cfg)
    except ConfigError:
        raise
    except Exception as exc:
        raise StageFailed(_reason(exc), done) from exc
    return done


@task(name="publish", cache_policy=NO_CACHE, **NETWORK_RETRIES)
def publish_drafts(cfg: Config) -> str:
    from ..publish import publish_configured

    run = publish_configured(cfg)
    if run.errors:
        raise StageFailed("; ".join(run.errors), run.line())
    get_run_logger().info("publish: %s", run.line())
    return run.line()


@flow(name="publish")
def publish_flow(config: str | None = None, retries: bool = True) -> str:
    cfg = _config(config)
    with _turn(cfg, "publish"):
        return _retrying(publish_drafts, retries)(cfg)


@task(name="write digest", cache_policy=NO_CACHE)
def write_digest(cfg: Config, week: str | None) -> Written:
    from ..digest import write_digest as write

    done = write(cfg, week)
    get_run_logger().info("digest: %s", ", ".join(str(p) for p in done.paths))
    return done


@task(name="send digest", cache_policy=NO_CACHE, **NETWORK_RETRIES)
def send_digest(cfg: Config, digest: Digest) -> list[str]:
    """Off the warehouse's turn (taken only to record what was sent): a retry waits minutes,
    and sends only the channels that have not had the digest."""
    from ..digest import send_digest as send

    done = send(cfg, digest, lambda: _turn(cfg, "weekly-digest"))
    get_run_logger().info("digest sent by %s%s", ", ".join(done.sent) or "no channel",
                          "".join(f"; already sent by {where}" for where in done.skipped))
    return done.sent


@flow(name="weekly-digest")
def digest_flow(config: str | None = None, week: str | None = None, retries: bool = True) -> list[str]:
    cfg = _config(config)
    with _turn(cfg, "weekly-digest"):
        done = write_digest(cfg, week)
    paths = [str(p) for p in done.paths]
    try:
        _retrying(send_digest, retries)(cfg, done.digest)
    except ConfigError:
        raise
    except Exception as exc:
        raise StageFailed(_reason(exc), paths) from exc
    return paths


def _reason(exc: BaseException) -> str:
    """A failure in one line: our own errors say what happened; another's needs its type."""
    from ..digest import DigestError

    if isinstance(exc, StageFailed | DigestError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def schedule(settings: FlowsConfig, name: str) -> Schedule:
    value = getattr(settings, SCHEDULE_SETTING[name])
    if isinstance(value, int):
        return Interval(value)
    return Cron(value, timezone=settings.timezone)


#: The four flows, by the names their deployments carry.
FLOWS: dict[str, Any] = {"ingest": ingest_flow, "insights": insights_flow, "publish": publish_flow, "weekly-digest": digest_flow}

__all__ = [
    "FLOWS",
    "SCHEDULE_SETTING",
    "LocalServer",
    "ServerError",
    "StageFailed",
    "digest_flow",
    "ingest_flow",
    "insights_flow",
    "interrupted_if_gone",
    "local_server",
    "publish_flow",
    "schedule",
    "stop_on_signals",
    "task_runner",
]
