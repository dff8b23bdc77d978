"""The sample's planted problems, as a maintainer would check them: each recurring problem
should be exactly one cluster and one draft, and no draft should mix two planted problems.

Shared by ``benchmarks/embed_text.py`` (the table it prints) and ``tests/test_clusters_sample.py``
(the assertion), so both judge the same way. Every valid unit of ``data/sample/truth.jsonl`` is
matched to its record: by id (AFP records, AFS, session rows), by ``request_id`` (RFC-026,
whose records get a content-derived id), and for the units that carry neither (SEP-2369 items,
bare AFP submissions) by their line as written against the record's ``original``, equal but
where the scrubber redacted a string; a SEP item is the record ``<id>:<item>`` (a single-item
message keeps the bare id).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from feedback_insights.privacy import is_pseudonym

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
TRUTH: list[dict[str, Any]] = [json.loads(line) for line in (SAMPLE / "truth.jsonl").read_text().splitlines()]
#: Every recurring problem (not the praise themes): the ones that should become issues.
PROBLEMS = sorted({t["problem"] for t in TRUTH if not t["invalid"] and t["problem"] and t["polarity"] == "problem"})
_BY_LINE = ("sep2369.jsonl", "afp_submissions.jsonl")


#: Per planted problem: (thing terms, symptom term groups); a title passes when it holds one
#: thing term and one term of every symptom group.
GOLD: dict[str, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    "acme.hiring_role_filter": (("/companies/search", "company search", "search"),
                                (("filter", "param", "query", "queryable"), ("hiring", "role", "job"))),
    "acme.export_400_no_field": (("/contacts/export", "export"),
                                 (("400", "bad request", "invalid_request", "validation"),
                                  ("field", "param", "which", "details", "generic", "no hint", "opaque"))),
    "acme.pagination_cursor_repeats": (("cursor", "paginat", "page"),
                                       (("repeat", "duplicate", "same", "loop", "stuck", "again", "identical"),)),
    "acme.rate_limit_no_retry_after": (("429", "rate limit", "rate-limit", "throttl"),
                                       (("retry-after", "retry after", "reset", "backoff", "header"),)),
    "acme.webhook_docs_wrong_signature": (("webhook",),
                                          (("signature", "signing", "verif", "hmac"),
                                           ("doc", "wrong", "mismatch", "fail", "never match"))),
    "orbit.search_files_param_confusion": (("search_files",),
                                           (("param", "argument", "pattern", "query", "glob", "description"),)),
    "orbit.get_record_no_batch": (("get_record",),
                                  (("batch", "bulk", "one id", "single", "one at a time", "list of ids",
                                    "array", "n+1", "sequential"),)),
    "orbit.deploy_silent_failure": (("deploy",),
                                    (("silent", "ok", "success", "swallow", "never", "didn't", "no error"),)),
    "orbit.validate_before_create_undocumented": (("create_item",),
                                                  (("validat",), ("undocumented", "doc", "first", "before",
                                                                  "until", "requires", "needs", "unless"))),
    "orbit.list_projects_truncated": (("list_projects",),
                                      (("truncat", "capped", "cut", "50", "no pagination", "no cursor",
                                        "incomplete", "page", "offset"),)),
    "pags.tool_results_truncated": (("tool result", "tool output", "result", "output"),
                                    (("truncat", "cut off", "clipped", "partial", "chopped", "cut at"),)),
    "pags.claims_action_not_taken": (("claim", "said", "says", "told", "reported", "confirm"),
                                     (("never", "no ", "not ", "n't", "nothing", "without"),)),
    "pags.voice_misheard": (("voice", "dictation", "transcri", "speech", "spoken"),
                            (("mishear", "misheard", "wrong", "garbl", "mangl", "misrecogn", "instead"),)),
    "pags.empty_tool_calls": (("tool call", "tool_use", "function call", "tool invocation", "steps"),
                              (("empty", "blank", "no argument", "{}", "no input"),)),
    "pags.wrong_agent_roster": (("roster", "team", "agent list", "agents", "subordinate"),
                                (("stale", "out of date", "wrong", "deleted", "removed", "archived", "old",
                                  "ghost", "no longer"),)),
}


def named(problem: str, title: str | None) -> bool:
    """Whether ``title`` names ``problem``'s thing and symptom (:data:`GOLD`)."""
    if not title:
        return False
    things, symptoms = GOLD[problem]
    text = title.lower()
    return any(t in text for t in things) and all(any(s in text for s in group) for group in symptoms)


def _same(raw: Any, stored: Any) -> bool:
    """A value as written and as stored: equal, but where the scrubber redacted a string or
    ingest pseudonymised a person (an account, an owner)."""
    if isinstance(stored, str) and ("[REDACTED:" in stored or is_pseudonym(stored)):
        return isinstance(raw, str | int | float)
    if isinstance(raw, dict) and isinstance(stored, dict):
        return raw.keys() == stored.keys() and all(_same(raw[k], stored[k]) for k in raw)
    if isinstance(raw, list) and isinstance(stored, list):
        return len(raw) == len(stored) and all(_same(a, b) for a, b in zip(raw, stored, strict=True))
    return bool(raw == stored)


def truth_by_record(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Record id → its truth unit, for every valid unit of the sample."""
    rows = con.execute("SELECT id, dialect, request_id, original, source_uri FROM records").fetchall()
    ids = {r[0] for r in rows}
    by_request = {r[2]: r[0] for r in rows if r[1] == "rfc026"}
    lines = {name: (SAMPLE / name).read_text().splitlines() for name in _BY_LINE}
    stored = {name: [(r[0], json.loads(r[3])) for r in rows if Path(r[4]).name == name] for name in _BY_LINE}
    out: dict[str, dict[str, Any]] = {}
    for t in TRUTH:
        if t["invalid"]:
            continue
        if t["record_id"] in ids:
            out[t["record_id"]] = t
        elif t["record_id"] in by_request:
            out[by_request[t["record_id"]]] = t
        else:
            raw = json.loads(lines[t["file"]][t["line"] - 1])
            matches = {i for i, original in stored[t["file"]] if _same(raw, original)}
            if t["item"] is not None:
                matches = {i for i in matches if i.endswith(f":{t['item']}")} or {i for i in matches if ":" not in i}
            if not matches:
                raise LookupError(f"no record for {t['file']} line {t['line']} item {t['item']}")
            out.update(dict.fromkeys(matches, t))
    return out


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one planted problem came out of the pipeline."""

    problem: str
    reports: int
    clustered: int
    clusters: tuple[int, ...]  # members per cluster holding its reports, largest first
    drafts: int
    mixed_with: tuple[str, ...]  # other planted problems or praise themes in its drafts' clusters

    @property
    def whole(self) -> bool:
        """Exactly one cluster and one draft, and that draft holds no other planted key."""
        return len(self.clusters) == 1 and self.drafts == 1 and not self.mixed_with

    def row(self) -> list[str]:
        return [self.problem, str(self.reports), str(self.clustered), "+".join(map(str, self.clusters)) or "–",
                str(self.drafts), ", ".join(self.mixed_with) or "–", "yes" if self.whole else "no"]


HEADERS = ("planted problem", "reports", "clustered", "clusters (members)", "drafts", "drafts mixed with", "one and one")


def outcomes(con: duckdb.DuckDBPyConnection) -> list[Outcome]:
    """Each planted problem's outcome, from the warehouse after clustering and drafting."""
    truth = truth_by_record(con)
    placed = con.execute(
        """SELECT m.id, m.cluster_id, d.id FROM cluster_members m
           LEFT JOIN drafts d ON d.cluster_id = m.cluster_id AND d.status <> 'superseded'
           WHERE m.view = 'reports' AND m.cluster_id IS NOT NULL"""
    ).fetchall()
    keys_in: dict[int, set[str]] = defaultdict(set)
    for record_id, cluster_id, _ in placed:
        if (key := truth[record_id]["problem"]) is not None:
            keys_in[cluster_id].add(key)
    out = []
    for problem in PROBLEMS:
        mine = [(c, d) for i, c, d in placed if truth[i]["problem"] == problem]
        clusters = Counter(c for c, _ in mine)
        drafted = {c for c, d in mine if d is not None}
        mixed = sorted(set().union(*(keys_in[c] for c in drafted)) - {problem}) if drafted else []
        out.append(Outcome(problem, sum(t["problem"] == problem for t in truth.values()), len(mine),
                           tuple(sorted(clusters.values(), reverse=True)), len(drafted), tuple(mixed)))
    return out


def mixed_drafts(con: duckdb.DuckDBPyConnection) -> list[tuple[int, list[str]]]:
    """Drafts whose cluster holds reports of two or more planted keys (problems or praise)."""
    truth = truth_by_record(con)
    rows = con.execute(
        """SELECT d.id, list(m.id) FROM drafts d JOIN cluster_members m ON m.cluster_id = d.cluster_id
           WHERE m.view = 'reports' AND d.status <> 'superseded' GROUP BY d.id ORDER BY d.id"""
    ).fetchall()
    out = []
    for draft_id, members in rows:
        keys = sorted({truth[i]["problem"] for i in members if truth[i]["problem"]})
        if len(keys) > 1:
            out.append((draft_id, keys))
    return out
