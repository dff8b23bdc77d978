"""The stateless ``cluster`` command: a file in, one {id, cluster_id} line per input out."""

from __future__ import annotations

from pathlib import Path

import orjson

from feedback_insights.clusters import cluster_inputs, read_inputs
from feedback_insights.config import ClusteringConfig

from .conftest import run_cli, write_jsonl

GLOB = [
    "search_files ignores the glob parameter and returns every file in the repo",
    "The glob argument of search_files has no effect, all files come back",
    "search_files: passing glob='*.py' still lists every file, the filter is ignored",
]
WEBHOOK = [
    "Webhook signature verification fails: docs say sha1 of the body but it is sha256",
    "Every webhook delivery fails verification with the documented sha1 signature scheme",
    "The webhook signature docs are wrong, deliveries are signed with sha256 not sha1",
]
ODD = ["Loved the dark mode in the console", "HEAD /companies/{id} returns 405, wanted a cheap existence check"]


def test_duplicates_share_a_cluster_and_every_input_gets_a_line(tmp_path: Path) -> None:
    texts = [GLOB[0], WEBHOOK[0], ODD[0], GLOB[1], WEBHOOK[1], GLOB[2], ODD[1], WEBHOOK[2]]
    write_jsonl(tmp_path / "in.jsonl", [{"key": f"r{i}", "body": t} for i, t in enumerate(texts)])
    done = run_cli("cluster", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.jsonl"),
                   "--text-field", "body", "--id-field", "key")
    assert done.returncode == 0, done.stderr
    lines = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [line["id"] for line in lines] == [f"r{i}" for i in range(8)]
    cluster = {line["id"]: line["cluster_id"] for line in lines}
    glob, webhook = {cluster[k] for k in ("r0", "r3", "r5")}, {cluster[k] for k in ("r1", "r4", "r7")}
    assert len(glob) == 1 and len(webhook) == 1 and glob != webhook and None not in glob | webhook
    assert cluster["r2"] is None and cluster["r6"] is None
    assert "8 inputs → 2 clusters" in done.stderr


def test_canonical_records_are_composed_and_never_clustered_across_services(tmp_path: Path, embedder) -> None:
    records = [
        {"id": f"{prefix}{i}", "service": service, "lane": "bug_or_failure", "summary": t}
        for prefix, service in (("a", "orbit-mcp"), ("b", "other-api")) for i, t in enumerate(GLOB + WEBHOOK)
    ]
    write_jsonl(tmp_path / "records.jsonl", records)
    result = cluster_inputs(read_inputs(tmp_path / "records.jsonl", "text", "id"), embedder, ClusteringConfig())
    cluster = dict(result.iter_rows())
    for first, second in ((0, 3), (3, 6)):  # the glob reports, then the webhook reports
        a = {cluster[f"a{i}"] for i in range(first, second)}
        b = {cluster[f"b{i}"] for i in range(first, second)}
        assert len(a) == 1 and len(b) == 1 and a != b and None not in a | b


def test_bad_lines_are_named_with_their_line_and_field(tmp_path: Path) -> None:
    cases = {
        b'{"id": "x", "text": "fine"}\n{"id": "y", "text": "broken"\n': "in.jsonl:2: not JSON",
        b'{"text": "no id"}\n': "in.jsonl:1: id: required",
        b'{"id": "x", "text": 42}\n': "in.jsonl:1: text: expected a string, got int",
        b'[1, 2]\n': "in.jsonl:1: expected a JSON object, got list",
        b'{"id": "x", "text": "a"}\n{"id": "x", "text": "b"}\n': "id 'x' appears more than once",
    }
    for body, message in cases.items():
        (tmp_path / "in.jsonl").write_bytes(body)
        done = run_cli("cluster", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.jsonl"))
        assert done.returncode == 2, body
        assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert not (tmp_path / "out.jsonl").exists()


def test_an_unknown_view_is_named(tmp_path: Path) -> None:
    done = run_cli("clusters", "list", "--view", "topics", cwd=tmp_path)
    assert done.returncode == 2
    assert "--view must be one of: reports, goals (got 'topics')" in done.stderr
