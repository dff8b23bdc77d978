"""``serve`` as an operator runs it, in the background: one Prefect server, a "trigger a run"
hint that works as printed, SIGINT honoured, and a dead server reported in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import psutil

from feedback_insights.config import FlowsConfig

from .test_flows import FAST_LOOPS, served_config

NEVER = "0 0 1 1 *"  # no schedule fires during a test: runs are triggered by hand


def _environment() -> dict[str, str]:
    """A fresh shell's: no Prefect settings of the test session's own."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}


def _background_job() -> None:
    """What a shell without job control (``serve &`` in a script) gives a background job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def serving(folder: Path) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``serve`` started in the background, and its output up to the hint (it is then ready)."""
    _, path = served_config(folder, FlowsConfig(ingest=NEVER, insights=NEVER, publish=NEVER, weekly_digest=NEVER))
    serve = subprocess.Popen(
        [sys.executable, "-m", "feedback_insights", "serve", "--config", str(path)],
        cwd=folder, env={**_environment(), **FAST_LOOPS}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_background_job, start_new_session=True,
    )
    lines: list[str] = []
    try:
        assert serve.stdout is not None
        while not (lines and lines[-1].startswith("trigger a run now: ")):
            line = serve.stdout.readline()
            assert line, f"serve ended before it was ready: {''.join(lines)} {serve.stderr.read() if serve.stderr else ''}"
            lines.append(line.rstrip("\n"))
        yield serve, lines
    finally:
        if serve.poll() is None:  # a failed test: end serve, and its server (a session of its own)
            for server in _prefect_servers(serve.pid):
                server.kill()
            os.killpg(serve.pid, signal.SIGKILL)
        serve.wait(timeout=30)


def _prefect_servers(pid: int) -> list[psutil.Process]:
    """The Prefect API servers among a process's descendants (``prefect server start``, or the
    uvicorn of a temporary one)."""
    return [p for p in psutil.Process(pid).children(recursive=True)
            if "prefect server start" in " ".join(p.cmdline()) or "prefect.server.api.server" in " ".join(p.cmdline())]


def _wait_for_an_ingest(warehouse: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with duckdb.connect(str(warehouse), read_only=True) as con:
                if con.execute("SELECT count(*) FROM ingest_runs WHERE status = 'ok'").fetchall()[0][0]:
                    return
        except duckdb.Error:
            pass  # not created yet, or the flow is writing it right now
        time.sleep(1)
    raise AssertionError(f"the triggered ingest did not run within {timeout:.0f} s")


def test_serve_runs_one_server_its_hint_works_and_sigint_stops_it(tmp_path: Path) -> None:
    with serving(tmp_path) as (serve, lines):
        servers = _prefect_servers(serve.pid)
        assert len(servers) == 1, [s.cmdline() for s in servers]
        hint = lines[-1].removeprefix("trigger a run now: ")
        assert "ingest/ingest" in hint
        # As printed, in another shell that knows nothing of serve's settings.
        triggered = subprocess.run(["bash", "-c", hint], env=_environment(), cwd=tmp_path, capture_output=True,
                                   text=True, timeout=120, check=False)
        assert triggered.returncode == 0, triggered.stdout + triggered.stderr
        assert "Created flow run" in triggered.stdout
        _wait_for_an_ingest(tmp_path / "feedback.duckdb", timeout=300)

        os.kill(serve.pid, signal.SIGINT)  # `kill -INT`, to the background job itself
        serve.wait(timeout=90)
        assert serve.returncode == 0, serve.stderr.read() if serve.stderr else ""
        assert not servers[0].is_running(), "the Prefect server outlived serve"


def test_serve_exits_non_zero_in_one_line_when_its_server_dies(tmp_path: Path) -> None:
    with serving(tmp_path) as (serve, _):
        (server,) = _prefect_servers(serve.pid)
        server.kill()
        _, errors = serve.communicate(timeout=90)
    assert serve.returncode == 2
    assert errors.splitlines() == [
        f"error: the Prefect server was killed (SIGKILL) while serving; serve stopped (the server's log: "
        f"{tmp_path.resolve() / '.prefect' / 'server.log'})"
    ], errors
