from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pytest

if TYPE_CHECKING:
    import click
    import click.testing

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CONFORMANCE = SHARED / "spec" / "afp" / "spec" / "conformance"
SAMPLE = REPO / "data" / "sample"


def pytest_sessionstart(session: pytest.Session) -> None:
    """The README's test command is all the set-up there is: the browser tests drive Debian's
    chromium, so it is installed here when it is missing (apt-get, as root or with sudo)."""
    if shutil.which(os.environ.get("CHROMIUM", "/usr/bin/chromium")) or not shutil.which("apt-get"):
        return  # present, or not a Debian machine: the browser tests then say how to install it
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    print("installing Debian's chromium for the browser tests (apt-get install chromium)", file=sys.stderr)
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=False)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"], check=False,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The browser tests run last. Playwright's sync API keeps an event loop running in the main
    thread from its first test to the end of the session, and ``asyncio.run`` (the MCP client,
    the SMTP tests) refuses to start under a running loop."""
    items.sort(key=lambda item: "playwright" in getattr(item, "fixturenames", ()))


def _prefect_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("PREFECT_")}


#: The Prefect settings of the environment the tests were started in.
SESSION_PREFECT_SETTINGS = _prefect_settings()


@pytest.fixture(scope="module", autouse=True)
def _prefect_settings_stay_in_their_module() -> Iterator[None]:
    """A module ends with the Prefect settings the session began with (a fixture of wider
    scope may not change them either). Every ``run`` and ``serve`` a test starts inherits this
    process's environment: a ``PREFECT_HOME`` test_flows left behind once made test_canaries'
    run keep its state in test_flows' home."""
    yield
    after = _prefect_settings()
    changed = sorted(k for k in SESSION_PREFECT_SETTINGS.keys() | after.keys() if SESSION_PREFECT_SETTINGS.get(k) != after.get(k))
    assert not changed, f"Prefect settings changed after this module: {', '.join(changed)}"  # names only: values may be keys


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """pytest-playwright's browser is Debian's chromium, never a downloaded one; and no page
    may reach the network: every host fails to resolve, IP literals included, but ``localhost``
    (so the tests' own servers are reached as ``http://localhost:PORT``)."""
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not shutil.which(chromium):
        pytest.fail(f"{chromium} is missing: install Debian's chromium (apt-get install -y chromium)")
    return {**browser_type_launch_args, "executable_path": chromium,
            "args": ["--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost"]}


def write_jsonl(path: Path, objects: list[object]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in objects))
    return path


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command, in a child process, as a user would run it."""
    return subprocess.run(
        [sys.executable, "-m", "feedback_insights", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def render_help(*words: str) -> click.testing.Result:
    """``feedback-insights WORDS --help`` as a pipe shows it (click wraps at 78 columns there),
    rendered by the app's own command in this process: a child process costs over a second to
    start, and a child's page is the same text (test_cli). The environment is left as it was:
    the root callback sets Prefect's console level, which child processes started later would
    otherwise inherit."""
    from click.testing import CliRunner

    return CliRunner().invoke(_root_command(), [*words, "--help"], prog_name="feedback-insights", terminal_width=78,
                              env={"PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": None})


@functools.cache
def _root_command() -> click.Command:
    """The click command ``feedback-insights`` runs, built once (typer builds it on every call)."""
    import typer

    from feedback_insights.cli import app

    return typer.main.get_command(app)


@pytest.fixture
def afp_record() -> dict:
    return {
        "id": "fb_01JAX3ZK7Q8W2M4N6P9R",
        "received_at": "2026-09-28T10:04:11Z",
        "service": "acme-companies-api",
        "account": "acct_7f3a",
        "source": "http",
        "feedback": {
            "type": "missing_capability",
            "goal": "Find companies currently hiring GTM engineers",
            "endpoint": "/companies/search",
            "method": "GET",
            "message": "No hiring-role filter is available",
            "outcome": "blocked",
            "workaround": False,
            "suggestion": "Add a hiring_role query parameter",
            "session_id": "sess_42",
            "request_id": "req_8f2c1a",
        },
    }


@pytest.fixture(scope="session")
def embedder():
    """The real packaged model on the default backend (ONNX Runtime), loaded once per test
    session (the imports alone cost ~10 s); exported once into ~/.cache/feedback-insights/onnx."""
    from feedback_insights.clusters import embedder_for
    from feedback_insights.config import EmbeddingConfig

    return embedder_for(EmbeddingConfig())


@pytest.fixture(scope="session")
def clustered_sample(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    """The embedded sample ingested, scored and clustered once per session; tests that change
    it take a copy (:func:`sample_copy`)."""
    from feedback_insights.clusters import cluster_new_records
    from feedback_insights.config import embedded_default
    from feedback_insights.ingest import ingest
    from feedback_insights.signals import score_new_records
    from feedback_insights.warehouse import Warehouse

    config = embedded_default(tmp_path_factory.mktemp("clustered-sample") / "feedback.duckdb")
    with Warehouse(config.warehouse.path) as warehouse:
        assert ingest(config, warehouse).errors == []
        score_new_records(warehouse)
        cluster_new_records(warehouse, embedder)
    return config.warehouse.path


def sample_copy(clustered: Path, folder: Path) -> Path:
    target = folder / "feedback.duckdb"
    shutil.copyfile(clustered, target)
    return target


def drafted_copy(clustered: Path, folder: Path) -> Path:
    """A copy of the clustered sample (``clustered``, the session's) with its drafts: pending
    ones, and the filed ones the sample's issues filed by hand give, as the embedded default
    drafts them. Drafted once per session, beside the clustered sample, then copied: tests
    stay independent, and the drafting stage is not run again for each of them."""
    drafted = clustered.with_name("drafted.duckdb")
    if not drafted.exists():
        from feedback_insights.config import embedded_default
        from feedback_insights.drafts import draft_clusters
        from feedback_insights.warehouse import Warehouse

        (clustered.parent / "drafting").mkdir(exist_ok=True)
        drafting = sample_copy(clustered, clustered.parent / "drafting")  # moved beside it once whole
        with Warehouse(drafting) as warehouse:
            draft_clusters(embedded_default(drafting), warehouse)
        drafting.replace(drafted)
    return sample_copy(drafted, folder)


@pytest.fixture
def hook() -> Iterator[tuple[list[dict], str]]:
    """A chat webhook on 127.0.0.1 that takes every post: what it was posted, and its URL."""
    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield received, f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
