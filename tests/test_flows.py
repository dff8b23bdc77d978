"""The Prefect flows, run for real: one Prefect test harness for the module, the sample end to
end, the same clusters on Prefect's threads, on a Dask cluster and in one process (the session's
clustered sample), and a schedule that fires under ``serve``."""

from __future__ import annotations

import io
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import httpx
import pytest
import yaml

from feedback_insights.config import Config, FileDropConfig, FlowsConfig, GitHubConfig, embedded_default

from .conftest import REPO, _root_command, drafted_copy, write_jsonl
from .github_fake import running_github


@pytest.fixture(scope="module")
def prefect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A Prefect API for this module's flows (a temporary SQLite server: ~20 s to start). Its
    settings are this module's only: a ``PREFECT_HOME`` left behind would be inherited by every
    ``run`` a later test starts, which would then keep its state in this module's home."""
    from prefect.testing.utilities import prefect_test_harness

    with pytest.MonkeyPatch.context() as env:
        env.setenv("PREFECT_HOME", str(tmp_path_factory.mktemp("prefect-home")))
        env.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        with prefect_test_harness(server_startup_timeout=180):
            yield


def _clusters(path: Path) -> set[frozenset[str]]:
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute(
            "SELECT view, list(collector || ':' || id) FROM cluster_members WHERE cluster_id IS NOT NULL GROUP BY view, cluster_id"
        ).fetchall()
    return {frozenset([view, *members]) for view, members in rows}


def test_the_flows_run_the_sample_end_to_end(
    prefect, clustered_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feedback_insights.drafts import approve
    from feedback_insights.flows import FLOWS as flows
    from feedback_insights.warehouse import Warehouse

    with running_github() as github:
        github.add_repo("acme/feedback")
        monkeypatch.setenv("FI_FLOW_GITHUB_TOKEN", github.token)
        config = embedded_default(tmp_path / "feedback.duckdb").model_copy(update={
            "github": GitHubConfig(base_url=github.url, token_env="FI_FLOW_GITHUB_TOKEN", default_repo="acme/feedback",
                                   timeout=2, retries=1, backoff=0, seconds_between_writes=0),
            "digest": embedded_default().digest.model_copy(update={"folder": tmp_path / "digests"}),
        })
        path = _write_config(config, tmp_path)
        ingested = flows["ingest"](config=str(path))["line"]
        with duckdb.connect(str(config.warehouse.path), read_only=True) as con:
            [(duplicates, quarantined)] = con.execute(
                "SELECT count(*) FILTER (WHERE duplicate_of IS NOT NULL), (SELECT count(*) FROM quarantine) FROM records"
            ).fetchall()
        # Duplicates are called so, and the quarantined say where to see them.
        assert ingested.startswith(f"new 439, {duplicates} of them duplicates (a copy of a report already stored) · ")
        assert f" · quarantined {quarantined} (feedback-insights quarantine list) · " in ingested
        assert ingested.endswith(" · 439 records stored in all") and "retries" not in ingested
        assert duplicates >= 1 and quarantined >= 1
        insights = flows["insights"](config=str(path))
        with Warehouse(config.warehouse.path) as wh:
            (clusters,) = wh.con.execute("SELECT count(*) FROM clusters WHERE view = 'reports'").fetchone()
            (drafted, by_hand) = wh.con.execute(
                "SELECT count(*) FILTER (WHERE drafted_by <> 'hand'), count(*) FILTER (WHERE drafted_by = 'hand') FROM drafts"
            ).fetchone()
        # The flow's summary says what the warehouse holds: every cluster and draft is this run's.
        assert insights["signals"] == 439 and f"{clusters} new clusters" in insights["reports"] and clusters >= 15
        assert insights["drafts"].startswith(f"{drafted} new drafts, 0 refreshed, {by_hand} attached to issues filed by hand")
        assert drafted >= 10 and by_hand >= 1
        # The flow's shards on Prefect's threads cluster as the library does in one process.
        assert _clusters(config.warehouse.path) == _clusters(clustered_sample)
        with Warehouse(config.warehouse.path) as wh:
            [(first,)] = wh.con.execute("SELECT min(id) FROM drafts WHERE status = 'pending'").fetchall()
            approve(wh, first, "maria")
        assert flows["publish"](config=str(path)).startswith("1 filed")
        assert len(github.issues("acme/feedback")) == 1
        digests = flows["weekly-digest"](config=str(path), week="2026-W47")
    assert sorted(Path(p).name for p in digests) == ["digest-2026-W47.html", "digest-2026-W47.md"]
    # A second pass finds nothing new and changes nothing.
    assert "new 0" in flows["ingest"](config=str(path))["line"]


def test_a_dask_cluster_gives_the_same_clusters(prefect, clustered_sample: Path, tmp_path: Path) -> None:
    """Shards of 100 on two Dask workers, against the session's sample clustered in one process
    (the end-to-end test shows the flow on Prefect's threads gives that too)."""
    from feedback_insights.flows import FLOWS as flows

    config = embedded_default(tmp_path / "feedback.duckdb").model_copy(
        update={"flows": FlowsConfig(task_runner="dask", dask_workers=2, shard_size=100)}
    )
    path = _write_config(config, tmp_path)
    flows["ingest"](config=str(path))
    flows["insights"](config=str(path))
    expected = _clusters(clustered_sample)
    assert _clusters(config.warehouse.path) == expected and len(expected) > 40


def test_prefect_yaml_declares_the_configured_schedules() -> None:
    declared = yaml.safe_load((REPO / "prefect.yaml").read_text())
    defaults = FlowsConfig()
    schedules = {d["name"]: d["schedules"][0] for d in declared["deployments"]}
    assert set(schedules) == {"ingest", "insights", "publish", "weekly-digest"}
    for name, setting in (("ingest", "ingest"), ("insights", "insights"), ("publish", "publish"), ("weekly-digest", "weekly_digest")):
        assert schedules[name]["cron"] == getattr(defaults, setting)
        assert schedules[name]["timezone"] == defaults.timezone


def test_serve_fires_a_schedule_and_stops_its_server(tmp_path: Path) -> None:
    config, path = served_config(
        tmp_path, FlowsConfig(ingest=5, insights="0 0 1 1 *", publish="0 0 1 1 *", weekly_digest="0 0 1 1 *")
    )
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}, **FAST_LOOPS}
    serve = subprocess.Popen(
        [sys.executable, "-m", "feedback_insights", "serve", "--config", str(path)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        runs = _wait_for_ingest_runs(config.warehouse.path, serve, timeout=240)
        assert runs >= 1
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        output, _ = serve.communicate(timeout=60)
    assert "Prefect server: http://127.0.0.1:" in output
    port = output.split("Prefect server: http://127.0.0.1:")[1].split()[0]
    leftover = subprocess.run(["pgrep", "-f", f"prefect server start --host 127.0.0.1 --port {port}"], capture_output=True, check=False)
    assert leftover.returncode == 1, "the Prefect server outlived serve"
    # The schedules were left active: the next serve (or a server started on that home) fires
    # them. That server is started as serve starts its own, by a process then killed outright,
    # as SIGKILL ends serve: its server goes with it.
    holder = subprocess.Popen([sys.executable, "-c", SERVER_HOLDER, str(tmp_path / ".prefect")], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        assert holder.stdout is not None
        api_url, server_pid = holder.stdout.readline().split()
        deployments = httpx.post(f"{api_url}/deployments/filter", json={}, timeout=30).json()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    _gone(int(server_pid), "the Prefect server outlived the process that started it (killed with SIGKILL)")
    assert sorted(d["name"] for d in deployments) == ["ingest", "insights", "publish", "weekly-digest"]
    assert not any(d["paused"] for d in deployments)
    # Each with the one schedule [flows] gives it, still active.
    served = {d["name"]: [(s["schedule"], s["active"]) for s in d["schedules"]] for d in deployments}
    never = {"cron": "0 0 1 1 *", "timezone": config.flows.timezone}
    assert [(schedule.get("interval"), active) for schedule, active in served.pop("ingest")] == [(5.0, True)]
    for name, schedules in served.items():
        assert [({k: schedule.get(k) for k in never}, active) for schedule, active in schedules] == [(never, True)], name


#: A process that starts the local Prefect server as serve does and says where it answers.
SERVER_HOLDER = """
import sys, time
from pathlib import Path
from feedback_insights.flows import local_server
with local_server(Path(sys.argv[1])) as server:
    print(server.api_url, server.process.pid, flush=True)
    time.sleep(600)
"""


def _gone(pid: int, message: str, timeout: float = 60) -> None:
    import psutil

    try:
        process = psutil.Process(pid)
        process.wait(timeout=timeout)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        process.kill()
        raise AssertionError(message) from None


#: Prefect's server schedules a deployment's runs every 60 s, and ``serve``'s runner looks for
#: due runs every 10 s: a test's ``serve`` (its own server inherits this) does both every
#: second, so a run starts within seconds of being due. Prefect's own settings.
FAST_LOOPS = {"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "1", "PREFECT_RUNNER_POLL_FREQUENCY": "1"}


def _wait_for_ingest_runs(warehouse: Path, serve: subprocess.Popen, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert serve.poll() is None, serve.stdout.read() if serve.stdout else "serve exited"
        try:
            with duckdb.connect(str(warehouse), read_only=True) as con:
                (runs,) = con.execute("SELECT count(*) FROM ingest_runs WHERE status = 'ok'").fetchall()[0]
            if runs:
                return runs
        except duckdb.Error:
            pass  # not created yet, or the flow is writing to it right now
        time.sleep(1)
    raise AssertionError(f"no scheduled ingest ran within {timeout:.0f} s")


def served_config(folder: Path, flows: FlowsConfig) -> tuple[Config, Path]:
    """What a test's ``serve`` serves, and its file in ``folder``: the embedded default's
    settings over one report in a file drop, so that a run a schedule (or a test) starts is over
    in moments, however many a 5 s schedule has started at once on a busy machine."""
    drop = folder / "drop"
    drop.mkdir()
    write_jsonl(drop / "reports.jsonl", [{"type": "bug", "goal": "g", "message": "m"}])
    sources = [FileDropConfig(kind="files", name="drop", path=drop, service="acme-api")]
    config = embedded_default(folder / "feedback.duckdb").model_copy(update={"flows": flows, "sources": sources})
    return config, _write_config(config, folder)


def _write_config(config: Config, folder: Path) -> Path:
    """The configuration as a TOML file (flows take a path: parameters must be serialisable)."""
    import tomli_w

    data = config.model_dump(mode="json", exclude_none=True)
    data["privacy"] = {"hmac_key": config.privacy.key()}
    path = folder / "feedback-insights.toml"
    path.write_bytes(tomli_w.dumps(data).encode())
    return path


def test_flows_on_one_warehouse_take_turns(tmp_path: Path) -> None:
    """DuckDB has one writer: a second flow waits for the first instead of failing."""
    from feedback_insights.warehouse import exclusive

    warehouse = tmp_path / "feedback.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import time\nfrom pathlib import Path\nfrom feedback_insights.warehouse import exclusive\n"
            f"with exclusive(Path({str(warehouse)!r})):\n    print('held', flush=True)\n    time.sleep(2)\n"
        )],
        stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    start = time.monotonic()
    with exclusive(warehouse):
        waited = time.monotonic() - start
    holder.wait(timeout=10)
    assert waited > 1.0


def test_the_weekly_digest_is_sent_off_the_warehouse_turn(prefect, clustered_sample: Path, tmp_path: Path) -> None:
    """The flow holds the warehouse to build and write the digest only: while the mail server
    is being sent it, another process (the desk, a flow) takes the turn and opens the file."""
    import socket

    from aiosmtpd.controller import Controller

    from feedback_insights.config import DigestConfig, EmailConfig
    from feedback_insights.flows import FLOWS as flows
    from feedback_insights.warehouse import Warehouse, exclusive

    from .conftest import sample_copy

    path = sample_copy(clustered_sample, tmp_path)
    seen: list[int] = []

    class Relay:
        async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 (aiosmtpd's name)
            with exclusive(path, "the test", timeout=0), Warehouse(path) as wh:  # WarehouseBusy if the flow held it
                seen.append(wh.con.execute("SELECT count(*) FROM records").fetchone()[0])
            return "250 OK"

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    relay = Controller(Relay(), hostname="127.0.0.1", port=port)
    relay.start()
    try:
        email = EmailConfig.model_validate({"host": "127.0.0.1", "port": port, "starttls": False,
                                            "from": "digest@example.com", "to": ["pm@example.com"]})
        config = embedded_default(path).model_copy(update={"digest": DigestConfig(folder=tmp_path / "out", email=email)})
        digests = flows["weekly-digest"](config=str(_write_config(config, tmp_path)), week="2026-W47", retries=False)
    finally:
        relay.stop()
    assert sorted(Path(p).name for p in digests) == ["digest-2026-W47.html", "digest-2026-W47.md"]
    assert len(seen) == 1 and seen[0] > 400
    with Warehouse(path) as wh:
        assert wh.con.execute("SELECT week, channel FROM digest_sends").fetchall() == [("2026-W47", "email")]


@contextmanager
def prefect_console() -> Iterator[io.StringIO]:
    """What Prefect's console handler prints meanwhile, as a terminal would show it (the handler
    holds the stream it was set up with, so capturing sys.stderr would not see it). Prefect
    makes it on first use; a real ``run`` process starts without it (checked by hand: the
    README's pasted output)."""
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, PrefectConsoleHandler)]
    assert handlers, "Prefect's console handler is not on the root logger"
    shown = io.StringIO()
    files = [h.console.file for h in handlers]
    for handler in handlers:
        handler.console.file = shown
    try:
        yield shown
    finally:
        for handler, file in zip(handlers, files, strict=True):
            handler.console.file = file


def _run(config: Path):  # noqa: ANN202 (click's Result)
    """``feedback-insights run --config CONFIG`` in this process (a child would start a Prefect
    server of its own), leaving the environment as it was."""
    from click.testing import CliRunner

    restored = {"PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": None, "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": None}
    return CliRunner().invoke(_root_command(), ["run", "--config", str(config)], prog_name="feedback-insights",
                              env=restored)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_run_with_an_unreachable_webhook_says_so_once_after_the_summary(
    prefect, clustered_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every stage ran: the summary as usual (a second run's, over a drafted sample), one line for
    the send that failed, exit 1; none of Prefect's failure reports or tracebacks."""
    from feedback_insights.config import DigestConfig

    path = drafted_copy(clustered_sample, tmp_path)
    monkeypatch.setenv("FI_DEAD_HOOK", f"http://127.0.0.1:{_closed_port()}/hook")
    config = embedded_default(path).model_copy(
        update={"digest": DigestConfig(folder=tmp_path / "digests", webhook_env="FI_DEAD_HOOK")})
    with prefect_console() as shown:
        done = _run(_write_config(config, tmp_path))
    assert done.exit_code == 1, (done.output, done.exception)
    assert done.stderr.splitlines() == [
        "error: weekly-digest: the digest webhook ($FI_DEAD_HOOK) could not be reached (ConnectError); gave up after 3 tries"
    ]
    assert "Traceback" not in shown.getvalue() and "| ERROR" not in shown.getvalue(), shown.getvalue()
    lines = done.stdout.splitlines()
    stages = [line.split(": ")[0] for line in lines]
    assert stages == ["ingest", "signals", "clusters", "goal themes", "drafts", "publish", "digest", "digest", "drafts",
                      "warehouse"], done.stdout
    assert sorted(Path(line.split(": ")[1]).name for line in lines if line.startswith("digest: ")) == [
        "digest-2026-W48.html", "digest-2026-W48.md"]
    # A second run reads its sources from where the first stopped: what it read again is not
    # set beside the warehouse's records as if it were all it found.
    with duckdb.connect(str(path), read_only=True) as con:
        [(stored,)] = con.execute("SELECT count(*) FROM records").fetchall()
    assert re.fullmatch(rf"ingest: new 0 · \d+ read again, already stored · quarantined 0 · {stored} records stored in all",
                        lines[0]), lines[0]


def test_run_on_a_dask_scheduler_that_does_not_answer_stops_in_one_line(prefect, clustered_sample: Path, tmp_path: Path) -> None:
    """Named by file and key at once, not after Dask's connect timeout with three tracebacks; what
    ran before is still said."""
    from feedback_insights.config import ConfigError

    path = drafted_copy(clustered_sample, tmp_path)
    address = f"tcp://127.0.0.1:{_closed_port()}"
    config = embedded_default(path).model_copy(update={"flows": FlowsConfig(task_runner="dask", dask_address=address)})
    toml = _write_config(config, tmp_path)
    with prefect_console() as shown:
        done = _run(toml)
    assert isinstance(done.exception, ConfigError), (done.output, done.exception)
    assert str(done.exception) == (f"{toml}: flows.dask_address: no Dask scheduler answers at {address} (connection refused); "
                                   "start it, or correct the address")
    assert "Traceback" not in shown.getvalue() and "| ERROR" not in shown.getvalue(), shown.getvalue()
    assert [line.split(": ")[0] for line in done.stdout.splitlines()] == ["ingest", "drafts", "warehouse"], done.stdout
