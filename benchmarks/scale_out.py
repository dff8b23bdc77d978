"""Scale-out: the insights flow on Prefect's threads and on a Dask cluster gives the same result.

Synthesises N records (``pipeline_speed.Synth``: paraphrases of a few hundred problems per
service), ingests them once, then runs the ``insights`` flow (signals → embed → cluster →
drafts) on two copies of that warehouse: ``task_runner = "local"`` and ``"dask"`` (a
LocalCluster of W worker processes, each loading the model once). Prints the wall time of each
and whether the clusters (as sets of member records, per view) and the drafts are identical.

On one 2-core machine Dask cannot be faster (the workers share the same two cores and each
loads the model); the point is that pointing ``dask_address`` at a real cluster changes
nothing else. Run by hand: ``python benchmarks/scale_out.py [N] [WORKERS]`` (default 5000, 2).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson
import tomli_w
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline_speed import Synth

from feedback_insights.config import (
    Config,
    FileDropConfig,
    FlowsConfig,
    PrivacyConfig,
    WarehouseConfig,
)
from feedback_insights.ingest import ingest
from feedback_insights.warehouse import Warehouse


def write_config(config: Config, folder: Path) -> Path:
    data = config.model_dump(mode="json", exclude_none=True)
    data["privacy"] = {"hmac_key": "scale-out-benchmark-xxxxxxxxxxxx"}
    path = folder / "feedback-insights.toml"
    path.write_bytes(tomli_w.dumps(data).encode())
    return path


def outcome(path: Path) -> tuple[set[frozenset[str]], list[tuple]]:
    with Warehouse(path) as wh:
        clusters = wh.con.execute(
            """SELECT view, list(collector || ':' || id) FROM cluster_members
               WHERE cluster_id IS NOT NULL GROUP BY view, cluster_id"""
        ).fetchall()
        drafts = wh.con.execute("SELECT title, accounts, reports FROM drafts ORDER BY title").fetchall()
    return {frozenset([view, *members]) for view, members in clusters}, drafts


def main(n: int, workers: int) -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from feedback_insights.flows import insights_flow

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        drop = root / "drop"
        drop.mkdir()
        (drop / "records.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in Synth().batch(n, first_day=0, days=56)))
        base = Config(
            warehouse=WarehouseConfig(path=root / "base.duckdb"),
            privacy=PrivacyConfig(hmac_key="scale-out-benchmark-xxxxxxxxxxxx"),
            sources=[FileDropConfig(kind="files", name="bench", path=drop)],
        )
        with Warehouse(base.warehouse.path) as wh:
            ingest(base, wh)
        rows = []
        for runner in ("local", "dask"):
            folder = root / runner
            folder.mkdir()
            shutil.copyfile(base.warehouse.path, folder / "feedback.duckdb")
            config = base.model_copy(update={
                "warehouse": WarehouseConfig(path=folder / "feedback.duckdb"),
                "flows": FlowsConfig(task_runner=runner, dask_workers=workers, shard_size=500),
            })
            start = time.perf_counter()
            insights_flow(config=str(write_config(config, folder)))
            rows.append((runner, time.perf_counter() - start, *outcome(config.warehouse.path)))
    (_, local_s, local_clusters, local_drafts), (_, dask_s, dask_clusters, dask_drafts) = rows
    table = Table(title=f"insights flow on {n:,} records")
    for column in ("task runner", "seconds", "clusters", "drafts"):
        table.add_column(column)
    table.add_row("local (threads)", f"{local_s:.1f}", str(len(local_clusters)), str(len(local_drafts)))
    table.add_row(f"dask (LocalCluster, {workers} workers)", f"{dask_s:.1f}", str(len(dask_clusters)), str(len(dask_drafts)))
    console = Console()
    console.print(table)
    same = local_clusters == dask_clusters and local_drafts == dask_drafts
    console.print(f"{'PASS' if same else 'FAIL'} identical clusters and drafts on both runners")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000, int(sys.argv[2]) if len(sys.argv) > 2 else 2)
