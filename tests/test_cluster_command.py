"""The stateless ``cluster`` command (a file in, one {id, cluster_id} line per input out), and
``clusters list`` / ``clusters show`` on the drafted sample as a script or a maintainer reads them."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from feedback_insights.cli._clusters import LISTED
from feedback_insights.clusters import cluster_inputs, read_inputs
from feedback_insights.config import SAMPLE_HMAC_KEY, ClusteringConfig
from feedback_insights.warehouse import Warehouse

from .conftest import drafted_copy, run_cli, write_jsonl
from .test_cli_output import _table, invoke

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
        status, _, stderr = invoke("cluster", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.jsonl"))
        assert status == 1, body  # the file is refused: exit 1, one line
        assert stderr.startswith("error: ") and message in stderr and stderr.count("\n") == 1, stderr
        assert not (tmp_path / "out.jsonl").exists()


def test_an_unknown_view_is_named(tmp_path: Path) -> None:
    status, _, stderr = invoke("clusters", "list", "--view", "topics")
    assert status == 2
    assert "--view must be one of: reports, goals (got 'topics')" in stderr


@pytest.fixture(scope="module")
def drafted(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the drafted sample, one cluster ignored and one that needs review."""
    folder = tmp_path_factory.mktemp("clusters-list")
    path = drafted_copy(clustered_sample, folder)
    (folder / "feedback-insights.toml").write_text('[warehouse]\npath = "feedback.duckdb"\n')
    with Warehouse(path) as wh:
        ranked = wh.con.execute(
            """SELECT c.id FROM clusters c JOIN drafts d ON d.cluster_id = c.id
               WHERE c.view = 'reports' AND c.polarity = 'problem' AND d.drafted_by <> 'hand' ORDER BY c.id""").fetchall()
        (ignored,), (review,) = ranked[:2]
        wh.con.execute("UPDATE clusters SET status = 'ignored' WHERE id = ?", [ignored])
        wh.con.execute("UPDATE clusters SET needs_review = (id = ?), confidence = 0.25 WHERE id = ?", [review, review])
        wh.con.execute("UPDATE clusters SET needs_review = false WHERE id <> ?", [review])
    return folder


def _ids(folder: Path, *options: str) -> list[int]:
    status, stdout, stderr = invoke("clusters", "list", "--json", "-n", "0", *options, "--config",
                                    str(folder / "feedback-insights.toml"))
    assert status == 0, stderr
    return [orjson.loads(line)["cluster_id"] for line in stdout.splitlines()]


def _cluster(folder: Path, status: str | None = None, review: bool | None = None) -> int:
    with Warehouse(folder / "feedback.duckdb") as wh:
        where = "status = ?" if status else "needs_review = ?"
        return wh.con.execute(f"SELECT id FROM clusters WHERE {where}", [status or review]).fetchall()[0][0]


def test_clusters_list_leaves_ignored_clusters_out_unless_asked(drafted: Path) -> None:
    ignored = _cluster(drafted, status="ignored")
    default, every, only = _ids(drafted), _ids(drafted, "--all"), _ids(drafted, "--status", "ignored")
    assert ignored not in default and ignored in every and only == [ignored]
    assert set(every) == set(default) | {ignored}
    assert ignored not in _ids(drafted, "--status", "open")
    status, _, stderr = invoke("clusters", "list", "--status", "merged", "--config", str(drafted / "feedback-insights.toml"))
    assert status == 2
    assert stderr == "error: --status must be one of: open, ignored, fixed, wont_fix (got 'merged')\n"


def test_clusters_list_json_gives_every_field_in_a_stable_order(drafted: Path) -> None:
    _, stdout, _ = invoke("clusters", "list", "--json", "-n", "0", "--config", str(drafted / "feedback-insights.toml"))
    rows = [orjson.loads(line) for line in stdout.splitlines()]
    assert rows and all(list(row) == list(LISTED) for row in rows)
    with Warehouse(drafted / "feedback.duckdb") as wh:
        drafts = {c: (i, s, t) for c, i, s, t in wh.con.execute("SELECT cluster_id, id, status, title FROM drafts").fetchall()}
        issues = dict(wh.con.execute("SELECT cluster_id, issue_url FROM drafts WHERE issue_url IS NOT NULL").fetchall())
    for row in rows:
        assert (row["draft_id"], row["draft_status"], row["draft_title"]) == drafts.get(row["cluster_id"], (None, None, None))
        assert row["issue_url"] == issues.get(row["cluster_id"])
        assert row["created_at"] and row["updated_at"] and row["as_of"] and row["week"].startswith("20")
    assert issues and any(row["issue_number"] for row in rows)  # the sample's issues filed by hand
    [flagged] = [row for row in rows if row["needs_review"]]
    assert flagged["cluster_id"] == _cluster(drafted, review=True) and flagged["confidence"] == 0.25


def test_a_cluster_that_needs_review_is_flagged_in_the_list_and_show(drafted: Path) -> None:
    review, config = _cluster(drafted, review=True), str(drafted / "feedback-insights.toml")
    status, listed, _ = invoke("clusters", "list", "-n", "0", "--config", config)
    _, rows = _table(listed, len(_ids(drafted)))
    [block] = [lines for lines in rows if lines[0].split()[0] == str(review)]
    assert "(review)" in " ".join(" ".join(block).split()) and "this week: 20" in listed
    assert sum("(review)" in " ".join(" ".join(lines).split()) for lines in rows) == 1
    status, shown, stderr = invoke("clusters", "show", str(review), "--config", config)
    assert status == 0, stderr
    assert "  confidence: 0.25 " in shown
    assert f"  needs review: not drafted automatically (drafts create {review} drafts it)\n" in shown
    assert "  draft: " in shown and "(this week: 20" in shown
    status, other, _ = invoke("clusters", "show", str(_cluster(drafted, status="ignored")), "--config", config)
    assert "needs review" not in other and "(ignored)" in other


def test_a_merge_is_taken_back_with_clusters_undo_and_unmerge(clustered_sample: Path, tmp_path: Path) -> None:
    """`clusters unmerge 6` answered "cluster 6 was not merged by an LLM" for a maintainer's
    merge, and nothing else could take one back."""
    path = drafted_copy(clustered_sample, tmp_path)
    config = tmp_path / "feedback-insights.toml"
    config.write_text(f'[warehouse]\npath = "{path}"\n[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n')
    rows = [row for row in _json_rows(config) if row["polarity"] == "problem"]
    into, other = next((a["cluster_id"], b["cluster_id"]) for a in rows for b in rows
                       if a["service"] == b["service"] and a["cluster_id"] < b["cluster_id"])

    def cli(*words: str) -> tuple[int, str, str]:
        return invoke(*words, "--config", str(config), env={"FEEDBACK_INSIGHTS_USER": "dana"})

    status, merged, _ = cli("clusters", "merge", str(into), str(other), "--reason", "same bug")
    assert status == 0 and merged.splitlines()[0] == f"merged cluster {other} into {into}"
    (hint,) = [line for line in merged.splitlines() if line.startswith("undo it: ")]
    action = hint.removeprefix("undo it: feedback-insights clusters undo ")
    status, history, _ = cli("clusters", "history", str(other), "--format", "json")
    [entry] = [orjson.loads(line) for line in history.splitlines()]
    assert (entry["id"], entry["action"], entry["can_undo"]) == (int(action), "merge", True)
    assert entry["sentence"].startswith(f"dana merged cluster {other} into cluster {into}")
    assert cli("clusters", "show", str(other))[0] == 1  # merged away

    status, undone, stderr = cli("clusters", "undo", action)
    assert status == 0, stderr
    assert undone.splitlines()[:2] == [f"undid correction #{action}", f"cluster {other} is back"]
    assert cli("clusters", "show", str(other))[0] == 0 and other in [r["cluster_id"] for r in _json_rows(config)]
    status, _, stderr = cli("clusters", "undo", action)
    assert (status, stderr) == (1, f"error: correction #{action} was already undone (by #{int(action) + 1})\n")

    # unmerge takes back a maintainer's merge too, and says so when there is none to take back.
    cli("clusters", "merge", str(into), str(other))
    status, unmerged, _ = cli("clusters", "unmerge", str(other))
    assert status == 0 and unmerged.splitlines()[:2] == [f"took back the merge of cluster {other}", f"cluster {other} is back"]
    status, _, stderr = cli("clusters", "unmerge", str(other))
    assert (status, stderr) == (1, f"error: cluster {other} was not merged into another cluster: nothing to unmerge\n")


def _json_rows(config: Path) -> list[dict]:
    status, stdout, stderr = invoke("clusters", "list", "--json", "-n", "0", "--config", str(config))
    assert status == 0, stderr
    return [orjson.loads(line) for line in stdout.splitlines()]
