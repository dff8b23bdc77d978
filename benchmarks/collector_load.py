"""Load benchmark for the collector's ``POST /feedback``: throughput, latency and no lost acks,
with known issues matched by meaning on every request.

What it measures
    1. Writes a temporary config (no rate limits, ``auth = "optional"``, a few agent keys, a
       pipeline key) and starts ``feedback-insights collector serve`` as a separate process on a
       free loopback port (its per-request JSON log goes to a temp file, read back for the
       server-side timings).
    2. Loads K known issues for its service (``--known-issues``, default 50) as the pipeline
       would PUT them: each the centroid (packaged model, this process) of 8 submissions of one
       (endpoint, problem) pair of the generator below, with its threshold and fingerprints, so
       every request is embedded and matched, and a share of them is told "known issue".
       ``--known-issues 0`` measures the collector without matching (its own targets).
    3. From this process, C keep-alive HTTP/1.1 connections (aiohttp, one coroutine per
       connection, closed loop) send realistic AFP submissions for N seconds or until a request
       budget is spent: varied types, goals, messages, endpoints and evidence, ~1-2 KB each, a
       unique ``session_id`` each (none is a retry) and a message no other request has (so no
       vector comes from the collector's cache), about two thirds with an agent key. A short
       warm-up comes first; its requests count for the store check, not for the timings.
       (Not httpx.AsyncClient: with 32 pooled connections its pool costs ~5 ms of client CPU
       per request, so it, not the server, was the limit at ~190 requests/s; aiohttp costs
       ~0.1 ms.)
    4. Prints requests by status, errors, accepted/s, the share told a known issue and
       p50/p95/p99/max latency (client side, and the server's own middleware timing from its
       log), and the CPU each process used: a client near 100 % of a core would mean the client,
       not the server, is the limit, and "other processes" shows when another job on the
       machine skews the run.
    5. Stops the server (SIGINT, uvicorn's clean shutdown), then checks the SQLite ``records``
       table against the 202 acks: "lost" = acked but not stored, "extra" = stored, never acked.
    6. PASS/FAIL for the targets: with known issues >= 250 accepted/s and p99 <= 150 ms;
       without, >= 1,000 accepted/s and p99 <= 50 ms; nothing lost (or extra) either way.

Needs aiohttp in the venv (``.venv/bin/pip install aiohttp``; not a project dependency).
Run (from the repository root; all traffic stays on 127.0.0.1)::

    .venv/bin/python benchmarks/collector_load.py [--seconds 30] [--concurrency 32] [--rate R]
        [--known-issues 50] [--max-requests 200000] [--warmup 2] [--keep]

Exit status 0 when every target passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.table import Table

from feedback_insights.collector import hash_key
from feedback_insights.config import CollectorConfig

try:
    import aiohttp
except ImportError:  # pragma: no cover - a benchmark-only tool
    sys.exit("collector_load.py needs aiohttp: .venv/bin/pip install aiohttp")

#: (accepted/s, p99 ms): without known issues, and matching every request against them.
TARGETS = {False: (1_000, 50.0), True: (250, 150.0)}
SERVICE = "acme-companies-api"
KNOWN_ISSUE_WAIT = CollectorConfig().known_issue_wait
PIPELINE_KEY = "bench-pipeline-key"
AGENT_KEYS = {f"bench-agent-key-{n:04d}": f"customer-{n}" for n in range(1, 6)}
UNKNOWN_KEY = "bench-agent-key-unregistered"  # auth = optional: stored under the key's hash
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

console = Console()


# -- the server ---------------------------------------------------------------------------------


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    db: Path
    log: Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(workdir: Path) -> Path:
    keys = ", ".join(f'"{hash_key(key)}" = "{account}"' for key, account in AGENT_KEYS.items())
    config = workdir / "collector.toml"
    config.write_text(
        "[privacy]\n"
        'hmac_key = "benchmark-key-xxxxxxxxxxxxxxxxxx"\n\n'
        "[collector]\n"
        f'db = "{workdir / "collector.sqlite"}"\n'
        f'service = "{SERVICE}"\n'
        'auth = "optional"\n'
        "rate_limit_per_account = 0\n"
        "rate_limit_per_ip = 0\n"
        f"api_keys = {{ {keys} }}\n"
        f'pipeline_keys = ["{hash_key(PIPELINE_KEY)}"]\n'
    )
    return config


def server_command(port: int, config: Path) -> list[str]:
    serve = ["-m", "feedback_insights", "collector", "serve", "--host", "127.0.0.1"]
    return [sys.executable, *serve, "--port", str(port), "--config", str(config)]


def start_server(workdir: Path, timeout: float = 30.0) -> Server:
    port, log = free_port(), workdir / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEEDBACK_INSIGHTS_")}
    command = server_command(port, write_config(workdir))
    with log.open("wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    server = Server(process, f"http://127.0.0.1:{port}", workdir / "collector.sqlite", log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the collector exited ({process.returncode}):\n{log.read_text()[-2000:]}"
            )
        try:
            if httpx.get(f"{server.url}/.well-known/agent-feedback", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    stop_server(server)
    raise RuntimeError(f"the collector did not answer within {timeout:.0f} s")


def stop_server(server: Server, timeout: float = 15.0) -> int:
    """SIGINT (uvicorn finishes in-flight requests and closes the store), SIGKILL if stuck."""
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)
        try:
            server.process.wait(timeout)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
    return server.process.returncode


def process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of a process (Linux /proc), None where that is not available."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_cpu() -> float | None:
    """CPU seconds every process on the machine has used (Linux /proc/stat)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


@dataclass
class CpuShare:
    """CPU used during a load, in cores (1.0 = one core busy the whole time)."""

    client: float
    server: float | None
    others: float | None  # every other process: another job on the machine skews the numbers


class CpuMeter:
    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.start = (time.process_time(), process_cpu(server_pid), machine_cpu())

    def read(self, elapsed: float) -> CpuShare:
        client0, server0, machine0 = self.start
        client = time.process_time() - client0
        server1, machine1 = process_cpu(self.server_pid), machine_cpu()
        server = server1 - server0 if server0 is not None and server1 is not None else None
        machine = machine1 - machine0 if machine0 is not None and machine1 is not None else None
        others = (
            max(0.0, machine - client - server)
            if machine is not None and server is not None
            else None
        )
        return CpuShare(
            client / elapsed,
            server / elapsed if server is not None else None,
            others / elapsed if others is not None else None,
        )


def stored_ids(db: Path) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        return [row[0] for row in con.execute("SELECT id FROM records")]


def server_timings(log: Path) -> list[float]:
    """The ``ms`` the server's middleware logged for each POST /feedback."""
    timings = []
    for line in log.read_bytes().splitlines():
        if line.startswith(b"{"):
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if entry.get("path") == "/feedback" and entry.get("method") == "POST":
                timings.append(float(entry["ms"]))
    return timings


# -- the submissions ----------------------------------------------------------------------------

TYPES = [
    "missing_capability",
    "bug",
    "unclear_documentation",
    "unexpected_response",
    "unhelpful_error",
    "performance",
    "other",
]
ENDPOINTS = [
    ("/companies/search", "GET"),
    ("/companies/{id}", "GET"),
    ("/contacts/export", "POST"),
    ("/webhooks/{id}/test", "POST"),
    ("/invoices", "GET"),
    ("/users/{id}/roles", "PATCH"),
    ("/reports/usage", "GET"),
    ("/deployments", "POST"),
    ("search_files", None),
    ("deploy_service", None),
    ("validate_item", None),
    ("create_ticket", None),
]
GOALS = [
    "Export contacts for account list '{w}'",
    "Look up company details for {n} domains",
    "Fix the user's webhook receiver that rejects every event",
    "Deploy {w} to production",
    "Reconcile {n} invoices against the ledger",
    "Find which role grants access to {w}",
    "Build a weekly usage report for the {w} team",
    "Create {n} tickets from the user's notes",
    "Locate the file that defines the {w} settings",
    "Migrate {n} users to the new plan",
]
PROBLEMS = [
    "Every call with limit set dies with HTTP 400 and the same opaque body; the error names no field.",
    "The endpoint returns 405 for HEAD. Wanted a cheap existence check before {n} lookups.",
    "Docs say sha1(body); the signature is really sha256(t + '.' + body) in header v1=.",
    "Pagination cursor repeats after page {n}; the same records come back twice.",
    "The call succeeded (ok: true) but nothing changed; a second read shows the old state.",
    "Responses took {n} s each at peak; the agent hit its own timeout and retried.",
    "The schema has both `glob` and `pattern`, the description mentions neither. Tried {n} combinations.",
    "Filters compose well and the answer was quick; finished the list in one pass.",
]
WORDS = [
    "churned-2025",
    "billing-worker",
    "eu-west",
    "onboarding",
    "finance",
    "support-bot",
    "ledger-sync",
]
AGENTS = [
    {
        "name": "claude-code",
        "version": "2.4.1",
        "model": "claude-sonnet-5",
        "framework": "claude-agent-sdk",
    },
    {"name": "codex-cli", "version": "0.98.0", "model": "gpt-5.1-codex", "framework": "codex"},
    {"name": "cursor-agent", "model": "claude-opus-5"},
    {"name": "gemini-cli", "model": "gemini-3-pro"},
    {"name": "research-agent", "model": "mistral-large-3"},
]
PASTED = [
    " The user wrote from jane.doe@example.com about it.",  # things the scrubber redacts
    " Request sent with api_key=sk_live_4eC39HqLyjWDarjtT1zdp7dc by mistake.",
    " Callback came from 203.0.113.{n}.",
]


def fill(template: str, rng: random.Random) -> str:
    return template.format(n=rng.randint(2, 500), w=rng.choice(WORDS))


def error_excerpt(rng: random.Random) -> str:
    error = {
        "code": "bad_request",
        "message": "Invalid request",
        "trace": f"{rng.getrandbits(64):x}",
    }
    return orjson.dumps({"error": error}).decode()


def submission_template(rng: random.Random, about: tuple[int, int] | None = None) -> dict[str, Any]:
    """One varied AFP submission, ~1-2 KB once serialised (``session_id`` is set per request);
    ``about``: (endpoint, problem) indices it reports, first of its sentences (else random)."""
    endpoint, method = ENDPOINTS[about[0]] if about else rng.choice(ENDPOINTS)
    sentences = [rng.choice(PROBLEMS) for _ in range(rng.randint(2, 5))]
    if about:
        sentences[0] = PROBLEMS[about[1]]
    message = " ".join(fill(sentence, rng) for sentence in sentences)
    if rng.random() < 0.1:
        message += fill(rng.choice(PASTED), rng)
    body: dict[str, Any] = {
        "spec_version": "0.1",
        "type": rng.choice(TYPES),
        "goal": fill(rng.choice(GOALS), rng),
        "message": message,
        "endpoint": endpoint,
        "outcome": rng.choice(["blocked", "degraded", "completed"]),
        "workaround": rng.random() < 0.4,
        "expected": fill(
            "A documented error naming the field, as /companies/search does for {w}.", rng
        ),
        "suggestion": fill("Return details[].path for {w} and document the limit (max {n}).", rng),
        "request_id": f"req_{rng.getrandbits(48):012x}",
        "agent": rng.choice(AGENTS),
        "evidence": {
            "status_code": rng.choice([200, 201, 400, 404, 405, 409, 422, 500, 503]),
            "request": {
                "limit": rng.randint(1, 1000),
                "filter": {"team": rng.choice(WORDS)},
                "page": rng.randint(1, 40),
            },
            "response_excerpt": error_excerpt(rng) * rng.randint(1, 4),
        },
        "metadata": {
            "attempt": rng.randint(1, 5),
            "tenant_region": rng.choice(["eu", "us", "apac"]),
        },
    }
    if method:
        body["method"] = method
    if body["workaround"]:
        body["workaround_description"] = fill(
            "Split the batch into chunks of {n} and retried each one.", rng
        )
    return body


def auth_headers(rng: random.Random) -> list[dict[str, str]]:
    """Per-request header sets: a third anonymous, most with a registered key, a few unknown."""
    base = {"content-type": "application/json"}
    sets = [base] * 10 + [
        {**base, "authorization": f"Bearer {key}"} for key in AGENT_KEYS for _ in range(3)
    ]
    sets += [{**base, "authorization": f"Bearer {UNKNOWN_KEY}"}] * 2
    rng.shuffle(sets)
    return sets


@dataclass
class Submissions:
    """Pre-built templates; each request only sets a fresh ``session_id`` and serialises."""

    templates: list[dict[str, Any]]
    headers: list[dict[str, str]]
    run: str
    count: int = 0

    @classmethod
    def build(cls, seed: int = 7, variants: int = 500) -> Submissions:
        rng = random.Random(seed)
        return cls(
            [submission_template(rng) for _ in range(variants)],
            auth_headers(rng),
            f"{os.getpid():x}{time.time_ns():x}",
        )

    def next(self) -> tuple[bytes, dict[str, str]]:
        n, self.count = self.count, self.count + 1
        body = self.templates[n % len(self.templates)]
        # A message of its own: the collector embeds every request, none from its cache.
        message = f"{body['message']} Seen in task {self.run}-{n}."
        data = orjson.dumps({**body, "message": message, "session_id": f"bench_{self.run}_{n:07d}"})
        return data, self.headers[n % len(self.headers)]


# -- the known issues ---------------------------------------------------------------------------

#: Submissions each known issue's centroid is made of.
MEMBERS = 8


def known_issues(count: int, seed: int = 11) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``count`` known issues for the service, as the pipeline PUTs them: each one (endpoint,
    problem) pair of the generator, its meaning the centroid of :data:`MEMBERS` submissions of
    it (embedded here with the packaged model, the text the pipeline embeds), the configured
    threshold, and a fingerprint of two of its words."""
    from feedback_insights.clusters import embedder_for, record_text
    from feedback_insights.config import EmbeddingConfig
    from feedback_insights.drafts import Meaning
    from feedback_insights.ingest import dialects
    from feedback_insights.ingest.dialects import Origin

    rng = random.Random(seed)
    pairs = [(e, p) for e in range(len(ENDPOINTS)) for p in range(len(PROBLEMS))]
    rng.shuffle(pairs)
    chosen = pairs[:count]
    texts = []
    for pair in chosen:
        for _ in range(MEMBERS):
            envelope = {"id": "fb_bench", "received_at": "2026-12-01T00:00:00Z", "source": "http", "service": SERVICE,
                        "feedback": submission_template(rng, pair)}
            canonical = dialects.dialect("afp").normalise(envelope, Origin("collector", envelope["received_at"]))[0]
            texts.append(record_text(dict(canonical)))
    settings = EmbeddingConfig()
    embedder = embedder_for(settings)
    vectors = embedder.encode(texts)
    out = []
    for n, (endpoint, problem) in enumerate(chosen):
        meaning = Meaning.of_members(embedder.model_id, vectors[n * MEMBERS : (n + 1) * MEMBERS],
                                     settings.known_issue_similarity)
        words = [w for w in PROBLEMS[problem].replace(";", " ").split() if w.isalpha() and len(w) > 4][:2]
        issue = {"id": f"bench-{n}", "title": f"{ENDPOINTS[endpoint][0]}: {PROBLEMS[problem][:60]}", "status": "acknowledged"}
        match = {"fingerprints": [{"service": SERVICE, "tool": ENDPOINTS[endpoint][0], "terms": words}],
                 "meaning": {**meaning.as_json(), "service": SERVICE}}
        out.append((issue, match))
    return out


def put_known_issues(server: Server, issues: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    headers = {"authorization": f"Bearer {PIPELINE_KEY}"}
    with httpx.Client(timeout=120) as http:
        for issue, match in issues:
            http.put(f"{server.url}/v1/known-issues/{issue['id']}", json={**issue, "match": match},
                     headers=headers).raise_for_status()


# -- the load -----------------------------------------------------------------------------------


@dataclass
class Tally:
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    acked_ids: list[str] = field(default_factory=list)
    malformed_acks: int = 0
    told_known: int = 0
    sent: int = 0
    elapsed: float = 0.0
    cpu: CpuShare | None = None

    @property
    def accepted(self) -> int:
        return self.statuses[202]


async def connection(
    session: aiohttp.ClientSession,
    url: str,
    submissions: Submissions,
    deadline: float,
    budget: list[int],
    tally: Tally,
    interval: float | None = None,
) -> None:
    """One keep-alive connection's worth of requests: closed loop, or one every ``interval``
    seconds (paced: a late answer delays this connection's next request, not the others')."""
    next_at = time.perf_counter() + (interval or 0) * random.random()
    while time.perf_counter() < deadline and budget[0] > 0:
        if interval:
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            next_at += interval
        budget[0] -= 1
        data, headers = submissions.next()
        tally.sent += 1
        started = time.perf_counter()
        try:
            async with session.post(url, data=data, headers=headers) as response:
                status, content = response.status, await response.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            tally.errors[type(exc).__name__] += 1
            continue
        tally.latencies_ms.append((time.perf_counter() - started) * 1000)
        tally.statuses[status] += 1
        if status == 202:
            ack = orjson.loads(content)
            if ack.get("status") == "accepted" and isinstance(ack.get("id"), str):
                tally.acked_ids.append(ack["id"])
                tally.told_known += "known_issue" in ack
            else:
                tally.malformed_acks += 1


async def load(
    server: Server, submissions: Submissions, seconds: float, concurrency: int, max_requests: int,
    rate: float | None = None,
) -> Tally:
    """C connections for ``seconds`` or ``max_requests``, whichever ends first; ``rate``: the
    requests a second offered in all (closed loop without)."""
    interval = concurrency / rate if rate else None
    tally, budget = Tally(), [max_requests]
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=10)
    ) as session:
        cpu = CpuMeter(server.process.pid)
        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(
            *(
                connection(session, f"{server.url}/feedback", submissions, deadline, budget, tally, interval)
                for _ in range(concurrency)
            )
        )
        tally.elapsed = time.perf_counter() - started
        tally.cpu = cpu.read(tally.elapsed)
    return tally


# -- the report ---------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of ``values`` (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = math.ceil(q / 100 * len(ordered))
    return ordered[min(len(ordered), max(1, rank)) - 1]


def latency_row(values: list[float]) -> list[str]:
    return [f"{percentile(values, q):.1f}" for q in (50, 95, 99, 100)]


def print_load(tally: Tally, server_ms: list[float], concurrency: int, known: int, rate: float | None) -> None:
    matching = f"{known} known issues matched on every request" if known else "no known issues"
    offered = f"{rate:g} requests/s offered" if rate else "closed loop"
    table = Table(title=f"POST /feedback · {concurrency} connections, {offered} · {matching} · {tally.elapsed:.1f} s")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("requests sent (after warm-up)", f"{tally.sent:,}")
    table.add_row("202 accepted", f"{tally.accepted:,}")
    for status, count in sorted(tally.statuses.items()):
        if status != 202:
            table.add_row(f"HTTP {status}", f"{count:,}")
    table.add_row(
        "errors (no response)",
        f"{sum(tally.errors.values()):,}" + (f"  {dict(tally.errors)}" if tally.errors else ""),
    )
    if tally.malformed_acks:
        table.add_row("202 without a usable id", f"{tally.malformed_acks:,}")
    table.add_row("accepted / s", f"{tally.accepted / tally.elapsed:,.0f}")
    if known:
        table.add_row("202s telling a known issue", f"{tally.told_known:,} ({tally.told_known / max(1, tally.accepted):.0%})")
        # A request the server held for the whole known_issue_wait got no vector in time: terms only.
        late = sum(ms >= 1000 * KNOWN_ISSUE_WAIT for ms in server_ms)
        table.add_row("held the whole known_issue_wait (terms only)", f"{late:,} ({late / max(1, len(server_ms)):.0%})")
    for label, values in (
        ("client latency ms", tally.latencies_ms),
        ("server middleware ms", server_ms),  # from the server's log: no queueing in it
    ):
        p50, p95, p99, top = latency_row(values)
        summary = f"{p50} / {p95} / {p99} / {top}" if values else "n/a"
        table.add_row(f"{label}  p50 / p95 / p99 / max", summary)
    if tally.cpu is not None:
        cores = os.cpu_count() or 1
        for label, share in (
            ("client process", tally.cpu.client),
            ("server process", tally.cpu.server),
            ("other processes", tally.cpu.others),
        ):
            if share is not None:
                table.add_row(f"CPU: {label}", f"{share:.0%} of a core (machine has {cores})")
    console.print(table)


@dataclass
class StoreCheck:
    acked: int
    rows: int
    lost: set[str]
    extra: set[str]
    duplicate_acks: int

    @property
    def ok(self) -> bool:
        return (
            not self.lost and not self.extra and not self.duplicate_acks and self.acked == self.rows
        )


def check_store(acked_ids: list[str], rows: list[str]) -> StoreCheck:
    acked, stored = set(acked_ids), set(rows)
    return StoreCheck(
        len(acked_ids), len(rows), acked - stored, stored - acked, len(acked_ids) - len(acked)
    )


def print_store(check: StoreCheck, exit_code: int) -> None:
    table = Table(title="202 acks vs SQLite records")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("server exit code", str(exit_code))
    table.add_row("202 acks (warm-up included)", f"{check.acked:,}")
    table.add_row("rows in records", f"{check.rows:,}")
    table.add_row("lost (acked, not stored)", f"{len(check.lost):,}")
    table.add_row("extra (stored, never acked)", f"{len(check.extra):,}")
    table.add_row("ids acked twice", f"{check.duplicate_acks:,}")
    console.print(table)
    for label, ids in (("lost", check.lost), ("extra", check.extra)):
        if ids:
            console.print(f"  {label}, first 5: {sorted(ids)[:5]}")


def verdicts(tally: Tally, check: StoreCheck, matching: bool) -> list[tuple[str, bool, str]]:
    rate, p99 = tally.accepted / tally.elapsed, percentile(tally.latencies_ms, 99)
    target_rate, target_p99 = TARGETS[matching]
    return [
        (
            f"accepted/s >= {target_rate:,}",
            rate >= target_rate,
            f"{rate:,.0f}/s",
        ),
        (
            f"p99 <= {target_p99:.0f} ms",
            tally.latencies_ms != [] and p99 <= target_p99,
            f"{p99:.1f} ms",
        ),
        ("zero lost (and no extra)", check.ok, f"lost {len(check.lost)}, extra {len(check.extra)}"),
    ]


# -- main ---------------------------------------------------------------------------------------


@contextmanager
def workdir(keep: bool) -> Iterator[Path]:
    if keep:
        path = Path(tempfile.mkdtemp(prefix="collector-load-"))
        console.print(f"work files kept in {path}")
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix="collector-load-") as path:
            yield Path(path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measured load duration")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="concurrent keep-alive connections"
    )
    parser.add_argument(
        "--rate", type=float, default=None,
        help="requests a second offered over all connections (default: closed loop, as fast as answered)",
    )
    parser.add_argument(
        "--known-issues", type=int, default=50, choices=range(0, 97), metavar="0-96",
        help="known issues loaded for the service, matched on every request (0: none)",
    )
    parser.add_argument(
        "--max-requests", type=int, default=200_000, help="stop after this many (warm-up included)"
    )
    parser.add_argument(
        "--warmup", type=float, default=2.0, help="seconds of unmeasured load first"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the config, database and server log"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    submissions = Submissions.build()
    sizes = sorted(len(orjson.dumps(t)) for t in submissions.templates)
    median = sizes[len(sizes) // 2]
    console.print(f"submissions: {len(sizes)} variants, {sizes[0]}-{sizes[-1]} B (median {median})")
    issues = known_issues(args.known_issues) if args.known_issues else []
    with workdir(args.keep) as path:
        server = start_server(path)
        try:
            put_known_issues(server, issues)
            console.print(
                f"collector pid {server.process.pid} at {server.url}; warm-up {args.warmup:.0f} s, "
                f"then {args.seconds:.0f} s × {args.concurrency} connections"
            )
            warm = Tally()
            if args.warmup > 0:
                warm = asyncio.run(
                    load(server, submissions, args.warmup, args.concurrency, args.max_requests, args.rate)
                )
            measured_from = len(server_timings(server.log))
            budget = max(0, args.max_requests - warm.sent)  # the warm-up counts towards the bound
            tally = asyncio.run(load(server, submissions, args.seconds, args.concurrency, budget, args.rate))
        finally:
            exit_code = stop_server(server)
        server_ms = server_timings(server.log)[measured_from:]
        print_load(tally, server_ms, args.concurrency, len(issues), args.rate)
        check = check_store(warm.acked_ids + tally.acked_ids, stored_ids(server.db))
        print_store(check, exit_code)
    results = verdicts(tally, check, bool(issues))
    for name, ok, value in results:
        console.print(f"{'[green]PASS[/]' if ok else '[red]FAIL[/]'}  {name}: {value}")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
