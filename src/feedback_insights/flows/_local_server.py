"""A local Prefect server as a child process, for ``serve`` when no ``PREFECT_API_URL`` is set.

Prefect's ephemeral mode cannot fire schedules ("Cannot schedule flows on an ephemeral
server"), so the embedded default runs a real one: SQLite in its own ``PREFECT_HOME``, bound to
127.0.0.1, analytics off, stopped (and waited for) when ``serve`` stops. If it dies while
``serve`` runs, ``serve`` stops too (:func:`interrupted_if_gone`): Prefect's clients would
otherwise retry and print a websocket traceback forever. If ``serve`` itself is killed (SIGKILL
gives it no chance to stop anything), the server goes too: it asks Linux for a signal when its
parent dies, as the ingest workers do.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

STARTUP_SECONDS = 120.0
#: How long ``serve`` may take to wind down after its server died before it is ended outright.
SHUTDOWN_SECONDS = 20.0


class ServerError(RuntimeError):
    """The local Prefect server did not start; the message carries the end of its log."""


@dataclass(slots=True)
class LocalServer:
    """A running ``prefect server start``: where it answers, and its process and log."""

    api_url: str
    process: subprocess.Popen[bytes]
    log: Path
    #: Set when the server exited while it was being served on (not when it was stopped).
    lost: bool = False

    @property
    def url(self) -> str:
        """The UI's address."""
        return self.api_url.removesuffix("/api")

    def failure(self) -> str:
        """One line: how the server ended, and where its log is."""
        code = self.process.returncode
        how = f"was killed ({signal.Signals(-code).name})" if code is not None and code < 0 else f"exited ({code})"
        return f"the Prefect server {how} while serving; serve stopped (the server's log: {self.log})"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


#: Run as ``python -c`` before the server: ask for SIGTERM when the parent (the thread that
#: started it: ``serve``'s main thread) dies, make sure it has not died already, then become the
#: server (the request outlives exec, so the server's own process is the one signalled).
_DIE_WITH_PARENT = """
import ctypes, os, signal, sys
if sys.platform.startswith("linux"):
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
os.execv(sys.argv[2], sys.argv[2:])
"""


def server_environment(home: Path) -> dict[str, str]:
    return {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


@contextmanager
def local_server(home: Path, port: int | None = None) -> Iterator[LocalServer]:
    """Start ``prefect server start`` and yield it once it answers; stop it after."""
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log_path = home / "server.log"
    log = log_path.open("ab")
    server_command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    child = subprocess.Popen(
        [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *server_command],
        env=server_environment(home), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    server = LocalServer(f"http://127.0.0.1:{port}/api", child, log_path)
    try:
        _wait_until_healthy(child, server.api_url, log_path)
        yield server
    finally:
        _stop(child)
        log.close()


@contextmanager
def interrupted_if_gone(server: LocalServer, report: Callable[[str], None]) -> Iterator[None]:
    """Run the block; if the server exits meanwhile, mark it ``lost``, silence logging (every
    line after that would be a client failing to reach it) and interrupt the main thread as
    Ctrl-C does (a SIGINT to this process), so the block ends and the caller can say so in one
    line. Should the block not end within :data:`SHUTDOWN_SECONDS`, ``report`` is given that
    line and the process exits 1."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            if server.process.poll() is None:
                continue
            server.lost = True
            logging.disable(logging.CRITICAL)
            # A real signal, not _thread.interrupt_main(): it also wakes the runner's event
            # loop from its wait (through the loop's wakeup descriptor).
            os.kill(os.getpid(), signal.SIGINT)
            if not done.wait(SHUTDOWN_SECONDS):
                report(server.failure())
                os._exit(1)
            return

    quiet = _QuietOnceGone(server)
    handlers = logging.getLogger().handlers
    for handler in handlers:
        handler.addFilter(quiet)
    thread = threading.Thread(target=watch, name="prefect-server-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        for handler in handlers:
            handler.removeFilter(quiet)


class _QuietOnceGone(logging.Filter):
    """Drops the failures that only say the server is gone: Prefect's clients notice a dead
    server (a websocket closed, a refused connection) a moment before the watch does."""

    def __init__(self, server: LocalServer) -> None:
        super().__init__()
        self.server = server

    def filter(self, record: logging.LogRecord) -> bool:
        if self.server.lost:
            return False
        if record.levelno < logging.WARNING or record.exc_info is None:
            return True
        try:  # a failure with a trace: is the server dying? (a killed process is reaped in ms)
            self.server.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return True  # alive: a real failure, shown
        return False


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal) end the block like Ctrl-C does, so the
    server is stopped on the way out (Prefect's runner, once started, handles SIGTERM itself).

    SIGINT is installed explicitly: a job started in the background by a shell without job
    control (``serve &`` in a script, ``nohup``) begins with SIGINT ignored, and Python then
    leaves it ignored, so ``kill -INT`` would do nothing."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    # Python's own handler, not ours: asyncio.run (the runner's loop) takes over SIGINT only
    # when it finds this one installed, and then cancels its tasks cleanly.
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_until_healthy(child: subprocess.Popen[bytes], url: str, log: Path) -> None:
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


def _stop(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM to its process group (uvicorn and its workers), then SIGKILL if it hangs."""
    if child.poll() is not None:
        try:
            os.killpg(child.pid, signal.SIGKILL)  # whatever it left behind
        except ProcessLookupError:
            pass
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
