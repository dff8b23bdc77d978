"""gitleaks' rule set inside the scrubber: shipped with its licence, compiled with RE2, applied
with its keywords, entropy thresholds and allow-lists; every rule finds samples generated from
its own regex, and the evidence (ids, SHAs, timestamps, paths, versions, counts) stays."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
import uuid
from importlib import resources
from pathlib import Path

import pytest
import re2

from feedback_insights.privacy import PLACEHOLDER, Pseudonymiser, Redactor, find, gitleaks_rules
from feedback_insights.privacy._gitleaks import packaged_rules_text, parse_rules
from feedback_insights.privacy.samples import PROSE, Sample, rule_samples

from .conftest import REPO, SHARED

RULES = gitleaks_rules()
SAMPLES: dict[str, list[Sample]] = {rule.id: samples for rule, samples in rule_samples(RULES, 5)}


def rule(rule_id: str):  # type: ignore[no-untyped-def]
    return next(r for r in RULES.rules if r.id == rule_id)


# -- the shipped copy --------------------------------------------------------------------------


def test_the_rule_set_ships_in_the_package_with_its_licence_and_provenance() -> None:
    folder = resources.files("feedback_insights.privacy").joinpath("gitleaks")
    toml, licence, readme = (folder.joinpath(name) for name in ("gitleaks.toml", "LICENSE", "README.md"))
    assert toml.is_file() and licence.is_file() and readme.is_file()
    assert "MIT License" in licence.read_text() and "Zachary Rice" in licence.read_text()
    assert "b58d3f102cf3a2c84cb7f923d05c25c9b1aed84b" in readme.read_text()
    # Copied unchanged from the vendored original.
    assert toml.read_bytes() == (SHARED / "vendor" / "gitleaks" / "gitleaks.toml").read_bytes()


def test_every_rule_compiles_with_re2_or_is_left_out_with_its_reason() -> None:
    compiled = parse_rules(packaged_rules_text(), compile_all=True)
    assert compiled.total == 222
    assert len(compiled.rules) == len(RULES.rules) == 221
    assert [rule_id for rule_id, _ in compiled.left_out] == ["pkcs12-file"]
    assert "path rule without a regex" in compiled.left_out[0][1]
    assert {rule_id for rule_id, _ in compiled.notes} == {
        "freemius-secret-key", "hashicorp-tf-password", "kubernetes-secret-yaml", "nuget-config-password"}
    for each in compiled.rules:
        assert PLACEHOLDER.fullmatch(f"[REDACTED:{each.kind}:1]"), each.id


def test_a_rule_re2_cannot_compile_is_left_out_and_named() -> None:
    broken = '[[rules]]\nid = "lookahead"\nregex = \'\'\'(?=x)abc\'\'\'\nkeywords = ["abc"]\n'
    parsed = parse_rules(packaged_rules_text() + "\n" + broken, compile_all=True)
    assert parsed.left_out[-1][0] == "lookahead" and "RE2 cannot compile" in parsed.left_out[-1][1]


# -- every rule, on samples of its own ---------------------------------------------------------


@pytest.mark.parametrize("rule_id", sorted(SAMPLES))
def test_every_rule_finds_samples_generated_from_its_regex(rule_id: str) -> None:
    """Each sample is one gitleaks itself reports (its keyword present, above its entropy
    threshold, allowed by no allow-list); the scrubber must cover every character of the
    secret — with gitleaks' rule or one of ours — and the prefilter must not change that."""
    samples = SAMPLES[rule_id]
    assert len(samples) == 5, f"the generator found no sample for {rule_id}"
    for sample in samples:
        finds = find(sample.text)
        covered = {i for f in finds for i in range(f.start, f.end)}
        assert set(range(sample.start, sample.end)) <= covered, (sample.text, sample.secret, finds)
        assert finds == find(sample.text, prefilter=False), sample.text


@pytest.mark.parametrize("rule_id", sorted(SAMPLES))
def test_every_rule_finds_its_samples_in_prose_followed_by_punctuation(rule_id: str) -> None:
    """The same tokens inside sentences, followed by ")", ",", "." or a quote: gitleaks ends most
    tokens at a quote, a blank or ";" (code, not prose), so "(EAAM…)" used to leak."""
    for sample in SAMPLES[rule_id]:
        for template in PROSE:
            placed = sample.in_prose(template)
            covered = {i for f in find(placed.text) for i in range(f.start, f.end)}
            assert set(range(placed.start, placed.end)) <= covered, (placed.text, placed.secret)


def test_every_rule_redacts_under_its_family_kind_when_no_rule_of_ours_covers_it() -> None:
    sample = SAMPLES["gitlab-pat"][0]
    scrubbed = Redactor().text(sample.text)
    assert sample.secret not in scrubbed and "[REDACTED:gitlab:1]" in scrubbed


# -- gitleaks' own cases (shared/data/gitleaks_cases.jsonl) -----------------------------------

CASES = [json.loads(line) for line in (SHARED / "data" / "gitleaks_cases.jsonl").read_text().splitlines()]
#: Prose around a pasted text, each ending it with one mark (the first copy of the secret in
#: each is the one that mark follows).
CASE_PROSE = ("{}", "It failed ({}) twice.", "Tried {}, then gave up.", "The key was {}.", "See [{}] for it.",
              "Got {{{}}} back.", "Sent <{}> as told.", "It was {}!", "Was it {}?", "Key {}: refused.",
              'Used "{}" as told.', "Used '{}' as told.")


def test_gitleaks_true_positives_are_redacted_bare_and_in_prose() -> None:
    missed = []
    for case in (c for c in CASES if c["kind"] == "tp" and c.get("secret")):
        for template in CASE_PROSE:
            text = template.format(case["text"].strip())
            at = text.index(case["secret"])
            covered = {i for f in find(text) for i in range(f.start, f.end)}
            if not set(range(at, at + len(case["secret"]))) <= covered:
                missed.append((case["id"], template))
    assert not missed, f"{len(missed)} missed: {missed[:20]}"


def test_gitleaks_false_positives_stay_unflagged_by_their_own_rule() -> None:
    """gitleaks' hand-written false positives (not those that are another rule's secret or a
    false positive only for their path): widening where a token may end must not make their
    rule fire. (Other rules, and ours, flag 72 of these 312 as before the widening: each holds
    a secret-shaped value.)"""
    unambiguous = [c for c in CASES if c["kind"] == "fp" and not c.get("other_rules_fire") and not c.get("fp_only_because_of_path")]
    assert len(unambiguous) == 312
    rules = {r.id: r for r in RULES.rules}
    fired = []
    for case in unambiguous:
        each = rules.get(case["rule"])
        if each is None or each.keywords and not any(k in case["text"].lower() for k in each.keywords):
            continue
        if list(each.finds(case["text"].encode(), RULES.allowlists)):
            fired.append(case["id"])
    assert fired == []
    assert sum(bool(find(c["text"])) for c in unambiguous) == 72


# -- gitleaks' semantics -----------------------------------------------------------------------


def test_entropy_thresholds_apply() -> None:
    rng = random.Random(1)
    low, high = "ghp_" + "ab" * 18, "ghp_" + "".join(rng.choice(string.ascii_letters) for _ in range(36))
    assert list(rule("github-pat").finds(low.encode(), RULES.allowlists)) == []
    assert list(rule("github-pat").finds(high.encode(), RULES.allowlists)) == [(0, 40)]


def test_allow_lists_apply_and_our_own_rules_still_see_the_value() -> None:
    example = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example: gitleaks allows ".+EXAMPLE$"
    assert list(rule("aws-access-token").finds(example.encode(), RULES.allowlists)) == []
    assert [f.kind for f in find(f"key {example} here")] == ["aws_access_key"]  # ours still redacts it
    stop = "adafruit_key = abcdefghijklmnopqrstuvwxyz012345"  # a global stop-word inside
    assert list(rule("adafruit-api-key").finds(stop.encode(), RULES.allowlists)) == []


def test_a_rule_runs_only_where_one_of_its_keywords_is() -> None:
    sha = "9fceb02d0ae598e95dc970b74767f19372d61af8"
    assert find(f"commit {sha} broke it") == []
    assert [f.kind for f in find(f"our sourcegraph instance logged {sha} twice")] == ["sourcegraph"]


def test_generic_names_of_cursors_and_ids_are_evidence() -> None:
    assert find("page_token=CiAKGjBhYjEyMzQ1Njc4OTAxMjM0NTY3ODkw next_page_token: abcdef1234567890") == []
    assert [f.kind for f in find("api_token=CiAKGjBhYjEyMzQ1Njc4OTAxMjM0NTY3ODkw")] == ["secret_value"]


def test_the_prefilter_still_sees_a_hint_after_megabytes_of_noise() -> None:
    """RE2 resets its automaton's cache rather than give up; a hint at the very end of 2 MB of
    random printable text is still seen."""
    rng = random.Random(3)
    noise = "".join(rng.choice(string.ascii_letters + string.digits + string.punctuation + " ") for _ in range(2_000_000))
    token = "ghp_" + "".join(rng.choice(string.ascii_letters) for _ in range(36))
    text = noise.replace("ghp_", "ghq_") + " " + token
    assert any(text[f.start : f.end] == token for f in find(text))


# -- hard negatives ----------------------------------------------------------------------------


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


#: Evidence of each kind, generated: none of it may be touched, alone or in a sentence.
NEGATIVES = {
    "uuid": lambda r: str(uuid.UUID(int=r.getrandbits(128), version=4)),
    "request_id": lambda r: r.choice(["req_", "req-", "fb_", "trace-"]) + _hex(r, r.choice([8, 12, 16])),
    "sha1": lambda r: _hex(r, 40),
    "sha256": lambda r: _hex(r, 64),
    "short_sha": lambda r: _hex(r, 7),
    "timestamp": lambda r: f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:"
    f"{r.randint(0, 59):02d}{r.choice(['Z', '.123Z', '+02:00'])}",
    "epoch_ms": lambda r: str(r.randint(1_600_000_000_000, 1_900_000_000_000)),
    "path": lambda r: r.choice(["/v2/orders/", "/api/companies/", "/var/log/app/"]) + f"{r.randint(1, 99999)}/items?page={r.randint(1, 9)}",
    "version": lambda r: f"v{r.randint(0, 9)}.{r.randint(0, 30)}.{r.randint(0, 99)}" + r.choice(["", "-beta.2", "+build.7"]),
    "count": lambda r: f"{r.randint(2, 99999)} {r.choice(['records', 'ms', 'companies', 'calls', 'retries'])}",
}
SENTENCE = "Agent report: the call failed, evidence {} (trace attached, retried twice)."


@pytest.mark.parametrize("kind", sorted(NEGATIVES))
def test_hard_negatives_are_untouched(kind: str) -> None:
    rng = random.Random(kind)
    for _ in range(200):
        value = NEGATIVES[kind](rng)
        for text in (value, SENTENCE.format(value)):
            assert find(text) == [], (kind, text, [text[f.start : f.end] for f in find(text)])


def test_snowflake_ids_in_identity_fields_are_untouched() -> None:
    rng = random.Random(5)
    for _ in range(300):
        snowflake = str(rng.getrandbits(62) | 1 << 60)
        report = {"id": snowflake, "received_at": "2026-10-01T10:00:00Z", "service": "svc",
                  "feedback": {"type": "bug", "goal": "g", "message": "m", "session_id": snowflake, "request_id": snowflake}}
        redactor = Redactor(Pseudonymiser("k"))
        assert redactor.value(report) == report and redactor.counts == {}


# -- the refresh script ------------------------------------------------------------------------


def test_the_refresh_script_copies_a_newer_config_and_reports_what_compiles(tmp_path: Path) -> None:
    source = tmp_path / "newer.toml"
    extra = '\n[[rules]]\nid = "lookbehind"\nregex = \'\'\'(?<=x)abc\'\'\'\nkeywords = ["abc"]\n'
    source.write_text((SHARED / "vendor" / "gitleaks" / "gitleaks.toml").read_text() + extra)
    into = tmp_path / "package-copy"
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "refresh_gitleaks.py"), str(source), "--license",
         str(SHARED / "vendor" / "gitleaks" / "LICENSE"), "--commit", "0123456789abcdef0123456789abcdef01234567",
         "--into", str(into)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "221 of 223 rules apply" in done.stdout
    assert "lookbehind: RE2 cannot compile" in done.stdout and "pkcs12-file" in done.stdout
    assert (into / "gitleaks.toml").read_text() == source.read_text()
    assert "MIT License" in (into / "LICENSE").read_text()
    assert "0123456789abcdef0123456789abcdef01234567" in (into / "README.md").read_text()
    re2.compile(parse_rules((into / "gitleaks.toml").read_text()).rules[0].pattern)
