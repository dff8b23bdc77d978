"""A real collector (uvicorn, its own SQLite file) on a free port on 127.0.0.1, for tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from feedback_insights.collector import Collector, Store, create_app, hash_key, server_config
from feedback_insights.config import CollectorConfig, EmbeddingConfig
from feedback_insights.privacy import Pseudonymiser

AGENT_KEY = "agent-key-0001"
INGEST_KEY = "ingest-key-0001"
#: A second service's key: it may delete only what it forwarded itself.
OTHER_INGEST_KEY = "ingest-key-0002"
PIPELINE_KEY = "pipeline-key-0001"
HMAC_KEY = "collector-test-key-xxxxxxxxxxxxx"


@dataclass
class RunningCollector:
    url: str
    collector: Collector
    db: Path


@contextmanager
def running_collector(tmp_path: Path, embedding: EmbeddingConfig | None = None, **settings: Any) -> Iterator[RunningCollector]:
    config = CollectorConfig(
        db=tmp_path / "collector.sqlite",
        service="acme-companies-api",
        api_keys={hash_key(AGENT_KEY): "customer-1"},
        ingest_keys=[hash_key(INGEST_KEY), hash_key(OTHER_INGEST_KEY)],
        pipeline_keys=[hash_key(PIPELINE_KEY)],
        **settings,
    )
    collector = Collector(config, Pseudonymiser(HMAC_KEY), Store(config.db), embedding or EmbeddingConfig())
    # As `collector serve` runs it: the same protocol, timeouts and connection cap.
    server = uvicorn.Server(server_config(create_app(collector), config, "127.0.0.1", 0))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the collector did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield RunningCollector(f"http://127.0.0.1:{port}", collector, config.db)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        collector.store.close()
