"""The AFP's own conformance cases, read from the spec folder: all 22 must pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from feedback_insights.ingest.dialects import afp

from .conftest import CONFORMANCE, run_cli, write_jsonl

CASES = sorted(CONFORMANCE.glob("*/*.json"))


def test_the_spec_ships_22_cases() -> None:
    assert len(CASES) == 22


@pytest.mark.parametrize("case_file", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_conformance_case(case_file: Path) -> None:
    case = json.loads(case_file.read_text())
    problems = afp.validate(case["submission"])
    if case_file.parent.name == "valid":
        assert problems == []
    else:
        expected = case["expect_error_path"]
        assert problems, f"{case['description']}: accepted"
        assert any(p.path.startswith(expected) for p in problems), (expected, problems)
        if expected == "":
            assert any(p.path == "" for p in problems)


@pytest.mark.parametrize("case_file", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_conformance_case_inside_a_record(case_file: Path) -> None:
    """The same rules apply to the submission inside a collector record, under feedback."""
    case = json.loads(case_file.read_text())
    record = {"id": "fb_1", "received_at": "2026-09-28T10:04:11Z", "feedback": case["submission"]}
    problems = afp.validate(record)
    if case_file.parent.name == "valid":
        assert problems == []
    elif isinstance(case["submission"], dict):
        expected = "feedback." + case["expect_error_path"] if case["expect_error_path"] else "feedback"
        assert any(p.path.startswith(expected) for p in problems), (expected, problems)


def test_cli_validate_reports_conformance_paths(tmp_path: Path) -> None:
    cases = [json.loads(p.read_text()) for p in CASES]
    data = write_jsonl(tmp_path / "cases.jsonl", [c["submission"] for c in cases])
    result = run_cli("validate", "--dialect", "afp", str(data))
    assert result.returncode == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["index"] for line in lines] == list(range(len(cases)))
    for case, line in zip(cases, lines, strict=True):
        assert set(line) == {"index", "dialect", "valid", "errors"}
        assert line["dialect"] == "afp"
        if "expect_error_path" in case:
            assert not line["valid"]
            assert any(e["path"].startswith(case["expect_error_path"]) for e in line["errors"])
        else:
            assert line["valid"] and line["errors"] == []


def test_record_shape_is_recognised_by_its_feedback_object(afp_record: dict) -> None:
    assert afp.looks_like(afp_record)
    assert afp.validate(afp_record) == []
    afp_record["feedback"]["severity"] = "high"
    afp_record["extra"] = 1
    paths = {p.path for p in afp.validate(afp_record)}
    assert paths == {"feedback.severity", "extra"}


def test_body_limit_is_16_kib_unless_configured_larger() -> None:
    big = {"type": "bug", "goal": "g", "message": "m", "metadata": {"blob": "x" * 16_400}}
    problems = afp.validate(big)
    assert problems[0].path == "" and "16384" in problems[0].message
    assert afp.validate(big, max_bytes=32_768) == []
