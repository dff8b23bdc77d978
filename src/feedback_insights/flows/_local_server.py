"""A local Prefect server as a child process, for ``serve`` when no ``PREFECT_API_URL`` is set.

Prefect's ephemeral mode cannot fire schedules ("Cannot schedule flows on an ephemeral
server"), so the embedded default runs a real one: SQLite in its own ``PREFECT_HOME``, bound to
127.0.0.1, analytics off, stopped (and waited for) when ``serve`` stops.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

STARTUP_SECONDS = 120.0


class ServerError(RuntimeError):
    """The local Prefect server did not start; the message carries the end of its log."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_environment(home: Path) -> dict[str, str]:
    return {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


@contextmanager
def local_server(home: Path, port: int | None = None) -> Iterator[str]:
    """Start ``prefect server start`` and yield its API URL once it answers; stop it after."""
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = (home / "server.log").open("ab")
    child = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=server_environment(home), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/api"
    try:
        _wait_until_healthy(child, url, home / "server.log")
        yield url
    finally:
        _stop(child)
        log.close()


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) end the block like Ctrl-C does, so the server is
    stopped on the way out (Prefect's runner, once started, handles SIGTERM itself)."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_until_healthy(child: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise ServerError(f"the Prefect server exited ({child.returncode}): {_tail(log)}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise ServerError(f"the Prefect server did not answer within {STARTUP_SECONDS:.0f} s: {_tail(log)}")


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM to its process group (uvicorn and its workers), then SIGKILL if it hangs."""
    if child.poll() is not None:
        return
    os.killpg(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
