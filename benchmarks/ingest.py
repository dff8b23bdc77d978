"""Ingest throughput: validate + normalise + store into DuckDB, against bare ``json.loads``.

Builds N records (default 200,000) in all dialects — mostly AFP collector records, as a
collector delivers them, with AFS, SEP-2369, RFC-026 and in-session rows mixed in and 1 %
invalid — writes them as one JSON Lines file, then times in one process:

- ``json.loads`` of every line (the floor any Python ingester pays);
- read → detect → validate → normalise → store, through the ingest loop with scrubbing left
  out (what the foundation's target is about);
- the real ingest path, with scrubbing and pseudonymisation, through
  :func:`feedback_insights.ingest.ingest` exactly as the CLI runs it.

Each into a fresh DuckDB file. Then the real ingest runs again in a child process, on the
whole file and on its first quarter, to show its peak memory (the ingest process and its largest
worker): files are streamed, so the peak follows the batch size, not the file size.

Run by hand: ``python benchmarks/ingest.py [N]``. Target: ≥ 20,000 records/s end to end.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from feedback_insights.config import (
    Config,
    FileDropConfig,
    IngestConfig,
    PrivacyConfig,
    WarehouseConfig,
)
from feedback_insights.ingest import BatchCounts, open_source, start_run
from feedback_insights.ingest._runner import IngestSummary, Stager, _ingest_source, ingest
from feedback_insights.warehouse import Warehouse

TYPES = ["missing_capability", "bug", "unclear_documentation", "unexpected_response", "unhelpful_error", "performance", "other"]
WORDS = ["search", "filter", "export", "page", "cursor", "webhook", "token", "field", "schema", "timeout", "retry", "company", "job", "contact"]

PRIVACY = PrivacyConfig(hmac_key="benchmark-key-xxxxxxxxxxxxxxxxxx")


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def afp_record(rng: random.Random, i: int) -> dict:
    feedback = {
        "type": rng.choice(TYPES),
        "goal": sentence(rng, 10),
        "message": sentence(rng, 25),
        "endpoint": f"/v2/{rng.choice(WORDS)}s",
        "method": rng.choice(["GET", "POST"]),
        "outcome": rng.choice(["blocked", "degraded", "completed"]),
        "workaround": rng.random() < 0.3,
        "request_id": f"req_{rng.getrandbits(32):08x}",
        "session_id": f"sess_{rng.getrandbits(24):06x}",
        "agent": {"name": "bench-agent", "model": "claude-opus-5"},
        "evidence": {"status_code": rng.choice([400, 404, 429, 500]), "response_excerpt": sentence(rng, 8)},
    }
    return {
        "id": f"fb_{i:026d}",
        "received_at": f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z",
        "service": rng.choice(["acme-api", "orbit-mcp", "pags"]),
        "account": f"acct_{rng.randint(0, 5000):05d}",
        "source": "http",
        "feedback": feedback,
    }


def other_dialect(rng: random.Random, i: int) -> dict:
    kind = i % 4
    if kind == 0:
        return {"id": f"fb_afs_{i}", "received_at": "2026-11-02T10:00:00Z", "service": "orbit-mcp", "account": "acct_1",
                "feedback": {"toolName": "search_files", "summary": sentence(rng, 12), "category": "Timeout",
                             "outcome": "failure", "severity": "high", "attemptedCalls": ["search_files"]}}
    if kind == 1:
        return {"jsonrpc": "2.0", "id": i, "method": "feedback/submit", "service": "orbit-mcp", "account": "acct_2",
                "params": {"feedbackVersion": "2026-03-08", "generatedAt": "2026-11-02T10:00:00Z",
                           "items": [{"category": "usability", "toolName": "get_record", "severity": 4,
                                      "observation": sentence(rng, 12)}]}}
    if kind == 2:
        return {"message_type": "FEEDBACK", "app_id": "pags", "request_id": f"req-{i}", "session_id": "sess-1",
                "pseudonym_id": f"usr-{i % 977:012x}", "timestamp": "2026-11-02T10:00:00Z", "rating": "thumbs_down",
                "comment": sentence(rng, 10), "relationship": {"type": "FEEDBACK_ON", "parent_id": f"req-{i}"}}
    return {"id": f"row-{i}", "ts": 1790000000000 + i, "user_id": "usr_1", "instance_id": "inst_1",
            "surface": "chat", "body": sentence(rng, 15), "sentiment": "bad", "trace_id": "d4bd169f-7d1e-45cb-921e-2828d85d3b64"}


def build(path: Path, n: int) -> None:
    rng = random.Random(7)
    with path.open("w") as handle:
        for i in range(n):
            if i % 100 == 99:
                obj = {"type": "feature_request", "goal": "g", "message": "m"}  # invalid: unknown enum value
            elif i % 10 == 0:
                obj = other_dialect(rng, i)
            else:
                obj = afp_record(rng, i)
            handle.write(json.dumps(obj) + "\n")


def ingest_without_scrubbing(config: Config, warehouse: Warehouse) -> BatchCounts:
    """The ingest loop, worker processes included, with the scrubbing stage left out: the
    product never runs this (it has no switch for it), the benchmark does to show the cost."""
    summary = IngestSummary(start_run(warehouse), BatchCounts())
    stager = Stager(os.cpu_count() or 1)
    try:
        source = open_source(config.sources[0], config.ingest.batch_size)
        _ingest_source(source, config, warehouse, stager, None, summary.run_id, summary, None)  # type: ignore[arg-type]
    finally:
        stager.close()
    warehouse.checkpoint()
    return summary.counts


_PEAK = """
import resource, sys
from pathlib import Path
from feedback_insights.config import Config, FileDropConfig, IngestConfig, PrivacyConfig, WarehouseConfig
from feedback_insights.ingest import ingest
from feedback_insights.warehouse import Warehouse
data, db = Path(sys.argv[1]), Path(sys.argv[2])
config = Config(privacy=PrivacyConfig(hmac_key="benchmark-key-xxxxxxxxxxxxxxxxxx"), warehouse=WarehouseConfig(path=db),
                ingest=IngestConfig(batch_size=10_000), sources=[FileDropConfig(kind="files", name="bench", path=data, service="pags")])
with Warehouse(db) as warehouse:
    ingest(config, warehouse)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_memory(data: Path, db: Path) -> tuple[float, float]:
    """Peak RSS in MB of an ingest of ``data`` in a fresh process, and of its largest worker."""
    done = subprocess.run([sys.executable, "-c", _PEAK, str(data), str(db)], capture_output=True, text=True, check=True)
    own, worker = (int(kb) / 1024 for kb in done.stdout.split())
    return own, worker


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "records.jsonl"
        build(data, n)
        lines = data.read_bytes().splitlines()
        mb = data.stat().st_size / 1e6

        start = time.perf_counter()
        for line in lines:
            json.loads(line)
        loads_s = time.perf_counter() - start

        config = Config(
            privacy=PRIVACY,
            warehouse=WarehouseConfig(path=Path(tmp) / "bench.duckdb"),
            ingest=IngestConfig(batch_size=10_000),
            sources=[FileDropConfig(kind="files", name="bench", path=data, service="pags")],
        )
        start = time.perf_counter()
        with Warehouse(Path(tmp) / "unscrubbed.duckdb") as warehouse:
            unscrubbed = ingest_without_scrubbing(config, warehouse)
        plain_s = time.perf_counter() - start

        start = time.perf_counter()
        with Warehouse(config.warehouse.path) as warehouse:
            summary = ingest(config, warehouse)
        ingest_s = time.perf_counter() - start
        stored = summary.counts.new + summary.counts.quarantined
        assert unscrubbed.new == summary.counts.new

        quarter = Path(tmp) / "quarter.jsonl"
        quarter.write_bytes(b"".join(line + b"\n" for line in lines[: n // 4]))
        memory = [(path, path.stat().st_size / 1e6, *peak_memory(path, Path(tmp) / f"peak-{path.stem}.duckdb"))
                  for path in (quarter, data)]

    table = Table(title=f"ingest benchmark: {n:,} records ({mb:.0f} MB of JSON Lines), worker processes as configured")
    for column in ("stage", "seconds", "records/s", "vs json.loads"):
        table.add_column(column, justify="right" if column != "stage" else "left")
    table.add_row("bare json.loads", f"{loads_s:.2f}", f"{n / loads_s:,.0f}", "1.00×")
    for stage, seconds in (
        ("validate + normalise + store (DuckDB)", plain_s),
        ("… + scrub + pseudonymise: `ingest` as run", ingest_s),
    ):
        table.add_row(stage, f"{seconds:.2f}", f"{n / seconds:,.0f}", f"{seconds / loads_s:.2f}× slower")
    Console().print(table)
    print(f"stored {summary.counts.new:,} records, quarantined {summary.counts.quarantined:,} (every input accounted for: {stored == n})")
    peaks = Table(title="peak memory of `ingest` (a fresh process; batch size 10,000)")
    for column in ("file", "MB of JSON Lines", "ingest process MB", "largest worker MB"):
        peaks.add_column(column, justify="right" if column != "file" else "left")
    for path, size, own, worker in memory:
        peaks.add_row(path.name, f"{size:.0f}", f"{own:.0f}", f"{worker:.0f}")
    Console().print(peaks)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
