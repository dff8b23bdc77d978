"""Slow clients against ``feedback-insights collector serve``: do they starve real requests?

What it does
    1. Starts ``collector serve`` as a separate process on a free loopback port, with its
       descriptor limit (``RLIMIT_NOFILE``, soft and hard) set to ``--nofile`` (default 256,
       the case the issue describes).
    2. Opens ``--slow`` connections (default 300) that each send half a request line and
       headers and then nothing, and watches when the server closes each one and with what.
    3. Meanwhile sends one real ``POST /feedback`` every ``--every`` seconds on a new connection
       (timeout 5 s) and records its status and latency.
    4. After ``--seconds`` (default 15, longer than the default 10 s header timeout), prints how
       the slow connections ended (408, 503, reset, still open) and how the real requests fared.

``--header-timeout`` and ``--max-connections`` are written into ``[collector]``; with
``--server-defaults`` no slow-client key is written at all (so the script also runs against a
collector that has none of them). Everything stays on 127.0.0.1; the run is bounded by
``--seconds``. Run from the repository root::

    .venv/bin/python benchmarks/slow_clients.py [--slow 300] [--nofile 256] [--seconds 15]
        [--header-timeout 10] [--max-connections 512] [--server-defaults]

Exit status 0 when every real request was answered 202 within 2 s and no slow connection was
left open past the header timeout (plus 2 s), 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson

SUBMISSION = {"type": "bug", "goal": "Page through orders", "message": "The cursor repeats on page 2",
              "outcome": "blocked"}
PARTIAL = b"POST /feedback HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"


@dataclass
class Slow:
    sock: socket.socket
    opened: float
    closed: float | None = None
    answer: bytes = b""
    ended: str = "open"


@dataclass
class Probes:
    statuses: Counter[str] = field(default_factory=Counter)
    seconds: list[float] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(workdir: Path, args: argparse.Namespace) -> Path:
    limits = "" if args.server_defaults else (
        f"header_timeout = {args.header_timeout}\nmax_connections = {args.max_connections}\n")
    config = workdir / "collector.toml"
    config.write_text(
        '[privacy]\nhmac_key = "benchmark-key-xxxxxxxxxxxxxxxxxx"\n\n[collector]\n'
        f'db = "{workdir / "collector.sqlite"}"\nrate_limit_per_account = 0\nrate_limit_per_ip = 0\n{limits}'
    )
    return config


def start_server(workdir: Path, args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "feedback_insights", "collector", "serve", "--host", "127.0.0.1",
               "--port", str(port), "--config", str(write_config(workdir, args))]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEEDBACK_INSIGHTS_")}

    def limit_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))

    with (workdir / "server.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env,
                                   preexec_fn=limit_descriptors)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the collector exited ({process.returncode}):\n"
                               f"{(workdir / 'server.log').read_text()[-2000:]}")
        try:
            if httpx.get(url + "/.well-known/agent-feedback", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the collector did not answer within 30 s")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def open_slow(port: int, count: int, watch: selectors.BaseSelector) -> list[Slow]:
    slow = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(PARTIAL)
        sock.setblocking(False)
        entry = Slow(sock, time.monotonic())
        watch.register(sock, selectors.EVENT_READ, entry)
        slow.append(entry)
    return slow


def read_ready(watch: selectors.BaseSelector, timeout: float) -> None:
    """Record what the server sent each slow connection, and when it closed it."""
    for key, _ in watch.select(timeout):
        entry: Slow = key.data
        try:
            chunk = entry.sock.recv(65536)
        except BlockingIOError:
            continue
        except ConnectionResetError:
            chunk, entry.ended = b"", "reset"
        entry.answer += chunk
        if not chunk:
            entry.closed = time.monotonic()
            if entry.ended == "open":
                entry.ended = entry.answer.split(b" ", 2)[1].decode() if entry.answer else "closed, no answer"
            watch.unregister(entry.sock)
            entry.sock.close()


def probe(url: str, probes: Probes) -> None:
    started = time.monotonic()
    try:
        answer = httpx.post(url + "/feedback", content=orjson.dumps(SUBMISSION), timeout=5,
                            headers={"content-type": "application/json", "connection": "close"})
        probes.statuses[str(answer.status_code)] += 1
    except httpx.HTTPError as exc:
        probes.statuses[type(exc).__name__] += 1
    probes.seconds.append(time.monotonic() - started)


def run(args: argparse.Namespace) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < args.slow + 64:  # this process holds every slow connection itself
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, args.slow + 64), hard))
    with tempfile.TemporaryDirectory(prefix="slow-clients-") as tmp:
        process, url = start_server(Path(tmp), args)
        watch = selectors.DefaultSelector()
        probes = Probes()
        try:
            slow = open_slow(httpx.URL(url).port or 0, args.slow, watch)
            end = time.monotonic() + args.seconds
            next_probe = time.monotonic()
            while (now := time.monotonic()) < end:
                if now >= next_probe:
                    probe(url, probes)
                    next_probe = time.monotonic() + args.every
                read_ready(watch, max(0.0, min(next_probe, end) - time.monotonic()))
        finally:
            stop_server(process)
        return report(args, slow, probes)


def report(args: argparse.Namespace, slow: list[Slow], probes: Probes) -> int:
    ended = Counter(entry.ended for entry in slow)
    held = sorted(entry.closed - entry.opened for entry in slow if entry.closed is not None)
    settings = "server defaults" if args.server_defaults else (
        f"header_timeout {args.header_timeout} s, max_connections {args.max_connections}")
    print(f"{args.slow} slow connections against a collector limited to {args.nofile} descriptors ({settings})")
    print("  how they ended:", ", ".join(f"{k} × {v}" for k, v in ended.most_common()))
    if held:
        print(f"  held open: shortest {held[0]:.1f} s, median {held[len(held) // 2]:.1f} s, longest {held[-1]:.1f} s")
    seconds = sorted(probes.seconds)
    print(f"{len(seconds)} real requests:", ", ".join(f"{k} × {v}" for k, v in probes.statuses.most_common()))
    if seconds:
        print(f"  latency: median {seconds[len(seconds) // 2] * 1000:.0f} ms, worst {seconds[-1] * 1000:.0f} ms")
    bounded = ended["open"] == 0 and (not held or held[-1] <= args.header_timeout + 2)
    answered = probes.statuses == Counter({"202": len(seconds)}) and bool(seconds) and seconds[-1] < 2
    print(("PASS" if bounded else "FAIL") + "  no slow connection outlives the header timeout")
    print(("PASS" if answered else "FAIL") + "  every real request answered 202 within 2 s")
    return 0 if bounded and answered else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", type=int, default=300, help="slow connections to open")
    parser.add_argument("--nofile", type=int, default=256, help="the server's descriptor limit")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long to run")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between real requests")
    parser.add_argument("--header-timeout", type=float, default=10.0)
    parser.add_argument("--max-connections", type=int, default=512)
    parser.add_argument("--server-defaults", action="store_true", help="write no slow-client settings")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(run(parse_args()))
