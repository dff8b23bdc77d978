"""gitleaks' rule set inside the scrubber: shipped with its licence, compiled with RE2, applied
with its keywords, entropy thresholds and allow-lists. Measured on gitleaks' own hand-written
cases (true positives removed bare and in prose, unambiguous false positives kept as written);
placeholders, references, masks, published examples and digests hold no secret; the evidence
(ids, SHAs, digests, timestamps, paths, versions, URLs) stays, in varied prose beside every
vendor's name too. Samples generated from each rule's regex are a self-check only."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
import uuid
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest
import re2

from feedback_insights.privacy import PLACEHOLDER, Finding, Pseudonymiser, Redactor, Rule, find, gitleaks_rules
from feedback_insights.privacy._gitleaks import packaged_rules_text, parse_rules
from feedback_insights.privacy.samples import PROSE, rule_sample, rule_samples

from .conftest import REPO, SHARED

sys.path.insert(0, str(REPO / "benchmarks"))
import secret_cases  # noqa: E402  (shared with benchmarks/scrub.py)

RULES = gitleaks_rules()


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


# -- gitleaks' own cases (shared/data/gitleaks_cases.jsonl, read by benchmarks/secret_cases.py) --


def _spans(finder: Callable[[str], list[Finding]]) -> secret_cases.Spans:
    return lambda text: [(f.start, f.end) for f in finder(text)]


def test_gitleaks_true_positives_are_removed_bare_and_in_prose() -> None:
    """Each of gitleaks' hand-written true positives, bare and in eleven sentences whose marks
    end the token (")", ",", ".", "]", "}", ">", "!", "?", ":", quotes): its secret occurs
    nowhere in the scrubbed text. All failures are reported at once."""
    spans = _spans(find)
    missed = []
    for case in secret_cases.true_positives():
        bare, survives = secret_cases.removed(spans, case)
        missed += [(case.id, where) for where in (["bare"] if not bare else []) + survives]
    assert len(secret_cases.true_positives()) == 294
    assert missed == [], f"{len(missed)} kept: {missed[:20]}"


def test_unambiguous_gitleaks_false_positives_are_kept_as_written() -> None:
    """gitleaks' hand-written false positives that hold nothing a scrubber must redact
    (secret_cases.ambiguity): at least 95 % come out as written, in each half of the cases (a
    method chosen on one half must hold on the other). And widening where a token may end never
    makes a case's own rule fire."""
    unambiguous = secret_cases.false_positives(ambiguous=False)
    assert len(unambiguous) == 307
    flagged = {c.id: [c.text[f.start : f.end] for f in find(c.text)] for c in unambiguous if find(c.text)}
    for half in "AB":
        cases = [c for c in unambiguous if c.half == half]
        kept = sum(c.id not in flagged for c in cases)
        assert kept >= 0.95 * len(cases), (half, kept, len(cases), flagged)
    rules = {r.id: r for r in RULES.rules}
    fired = [c.id for c in unambiguous if c.rule in rules and _fires(rules[c.rule], c.text)]
    assert fired == []


def _fires(each: Rule, text: str) -> bool:
    if each.keywords and not any(k in text.lower() for k in each.keywords):
        return False
    return bool(list(each.finds(text.encode(), RULES.allowlists)))


def test_ambiguous_false_positives_are_what_the_data_says() -> None:
    """"Another rule's secret" is computed by running gitleaks' other rules as gitleaks does;
    it must agree with what the data's extractor recorded for every case."""
    raw = {c["id"]: c for c in map(json.loads, secret_cases.CASES_PATH.read_text().splitlines())}
    for case in secret_cases.false_positives():
        recorded = bool(raw[case.id].get("other_rules_fire"))
        assert (case.ambiguous == "another rule's secret") == recorded, case.id
    reasons = {c.ambiguous for c in secret_cases.false_positives(ambiguous=True)}
    assert reasons == {"another rule's secret", "false only for its path", "personal data (an email)",
                       "labelled a secret in pii_cases"}


def test_the_prefilter_changes_nothing_on_gitleaks_cases() -> None:
    for case in secret_cases.cases():
        assert find(case.text) == find(case.text, prefilter=False), case.id


def test_every_rule_redacts_under_its_family_kind_when_no_rule_of_ours_covers_it() -> None:
    sample = rule_sample(rule("gitlab-pat"), RULES, random.Random(1))
    assert sample is not None
    scrubbed = Redactor().text(sample.text)
    assert sample.secret not in scrubbed and "[REDACTED:gitlab:1]" in scrubbed


def test_self_check_every_rule_finds_samples_generated_from_its_own_regex() -> None:
    """A self-check, not a measurement (the samples come from the regexes that find them): every
    rule, the 127 without a hand-written case too, still finds what it describes, bare and in
    prose, with the prefilter's hint (a sharper pattern than its keywords for some) letting it
    run. All failures at once."""
    failures: list[tuple[str, ...]] = []
    samples = dict(rule_samples(RULES, 3))
    assert len(samples) == len(RULES.rules)
    for each, found in samples.items():
        if len(found) != 3:
            failures.append((each.id, "no sample"))
        for sample in found:
            for placed in (sample, *(sample.in_prose(t) for t in PROSE)):
                covered = {i for f in find(placed.text) for i in range(f.start, f.end)}
                if not set(range(placed.start, placed.end)) <= covered:
                    failures.append((each.id, placed.text))
            if find(sample.text) != find(sample.text, prefilter=False):
                failures.append((each.id, "prefilter", sample.text))
    assert failures == [], f"{len(failures)}: {failures[:10]}"


# -- what holds no secret (privacy/_placeholders.py) ------------------------------------------


def _kinds(text: str) -> list[str]:
    return [f.kind for f in find(text)]


def _real(seed: int, n: int = 36) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


def test_placeholders_of_one_repeated_character_are_kept_and_real_tokens_are_not() -> None:
    for text in ("ghp_" + "x" * 36, "key = AKIA" + "X" * 16, "API_KEY=glc_" + "1" * 42 + "=", "xoxb-1234-" + "x" * 24,
                 "github_pat_" + "x" * 22 + "_" + "x" * 59):
        assert find(text) == [], text
    assert _kinds("ghp_" + _real(4)) == ["github_token"]
    assert _kinds("xoxa-2-511111111-31111111111-3111111111111-e039d02840a0b9379c") == ["slack_token"]  # gitleaks' own tp


def test_references_to_a_variable_are_kept_and_a_password_that_starts_like_one_is_not() -> None:
    for text in ("SUMO_ACCESS_KEY=${SUMO_ACCESS_KEY:=$2}", 'password = "${aws_db_instance.default.password}"',
                 'curl -H "apikey: $API_KEY" https://example.com', "SUMO_ACCESS_KEY={SumoAccessKey}",
                 'sumo_access_key = "<SUMOLOGIC ACCESS KEY>"', "SUMO_ACCESS_KEY=`etcdctl get /sumologic_secret`",
                 "api_token: {{ vault_api_token }}", "administrator_login_password = var.db_password"):
        assert find(text) == [], (text, [text[f.start : f.end] for f in find(text)])
    assert _kinds("password=$ecretP4ss") == ["secret_value"]
    assert _kinds("password=P4ss${word}x") == ["secret_value"]


def test_masked_keys_are_kept_but_an_ellipsis_after_a_whole_key_is_no_mask() -> None:
    for text in ('"token4": "xoxp-572370529330-573807301142-572331691188-####################"',
                 "api_key=sk_live_51Hq****************", "fn::secret: ops_eyJzaWduSW5B..[Redacted]",
                 '--token="sha256~XXXXXXXXXX_PUT_YOUR_TOKEN_HERE_XXXXXXXXXXXX"'):
        assert find(text) == [], text
    assert _kinds(f"the token was ghp_{_real(5)}... and it failed") == ["github_token"]


def test_published_examples_are_kept_whichever_rule_finds_them() -> None:
    """Firebase's documented keys: gcp-api-key's allow-list names them one by one, so they are
    public, found by our rule or gitleaks'. A key of the same shape is still redacted."""
    assert "AIzaSyCkEhVjf3pduRDt6d1yKOMitrUEke8agEM" in RULES.examples
    assert find('apiKey: "AIzaSyCkEhVjf3pduRDt6d1yKOMitrUEke8agEM",') == []
    assert _kinds('apiKey: "AIzaSyCkEhVjf3pduRDt6d1yKOMitrUEke8agEN",') == ["google_api_key"]
    assert not any(e.isalpha() for e in RULES.examples)  # the alphabet is a stop-word, not a value


def test_digests_are_evidence_unless_something_names_them_a_secret() -> None:
    rng = random.Random(6)
    sha = "".join(rng.choice("0123456789abcdef") for _ in range(40))
    for text in (f"our sourcegraph instance logged {sha} twice", f"Calling adobe failed with md5:{sha[:32]} (retried).",
                 f"the sentry release is sha256:{sha}{sha[:24]}."):
        assert find(text) == [], text
    assert _kinds(f"sourcegraph: {sha[:20].upper()}{sha[20:]}") == ["sourcegraph"]  # gitleaks' shape of its key
    for named in (f"sourcegraph: {sha}", f"sourcegraph token is {sha}", f"src login --token {sha} (sourcegraph)",
                  f"Authorization: Bearer {sha}", f"sourcegraph_token = '{sha}'"):
        assert sha not in Redactor().text(named), named


def test_names_that_gitleaks_generic_rule_allows_hold_no_secret_in_ours_either() -> None:
    value = "Mj2qykJO5rELyHgezQ69nzUX0i3OH67V7+V4eUrLfpuyOuxmiW9rhROG/Whikle15"
    assert find(f"csrf-token={value}") == [] and find(f"key_id: {value}") == []
    assert _kinds(f"api_token={value}") == ["secret_value"]


def test_our_formats_end_where_the_format_does() -> None:
    """A fixed-length key is not the prefix of a longer token; every Slack token has a number
    after its prefix; a key block holds key material; a value is on its key's line; a card
    number is not one digit repeated."""
    for text in ("AIzaTesb6Tscfcni8vIpWZqNCXFDFslJtVSvFDqabcd123", "- (id)hf_requiredCharacteristicTypesForDisplayMetadata;",
                 "xoxb-xoxb-my-bot-token", "https://indieweb.org/images/3/35/2018-250-xoxo-indieweb-1.jpg",
                 "-----BEGIN PRIVATE KEY-----\nanything\n-----END PRIVATE KEY-----", "GITHUB_API_KEY=\nDYNATRACE_API_KEY=",
                 "secretKey: github_token\n      property: github_token", "discord=000000000000000000"):
        assert find(text) == [], (text, [text[f.start : f.end] for f in find(text)])
    rng = random.Random(7)
    letters = "".join(rng.choice(string.ascii_letters) for _ in range(34))
    assert _kinds(f"hf_{letters}") == ["huggingface_token"]
    assert _kinds("token xoxb-12345678901-" + letters) == ["slack_token"]
    assert _kinds("discord=4111111111111111") == ["credit_card"]


# -- gitleaks' semantics -----------------------------------------------------------------------


def test_entropy_thresholds_apply() -> None:
    rng = random.Random(1)
    low, high = "ghp_" + "ab" * 18, "ghp_" + "".join(rng.choice(string.ascii_letters) for _ in range(36))
    assert list(rule("github-pat").finds(low.encode(), RULES.allowlists)) == []
    assert list(rule("github-pat").finds(high.encode(), RULES.allowlists)) == [(0, 40)]


def test_allow_lists_apply_and_our_own_rules_still_see_the_value() -> None:
    """A pattern allow-list stays with its rule: AWS's documented example is allowed by
    gitleaks' ".+EXAMPLE$", and ours still redacts it (pii_cases labels it a secret)."""
    example = "AKIAIOSFODNN7EXAMPLE"
    assert list(rule("aws-access-token").finds(example.encode(), RULES.allowlists)) == []
    assert [f.kind for f in find(f"key {example} here")] == ["aws_access_key"]
    stop = "adafruit_key = abcdefghijklmnopqrstuvwxyz012345"  # a global stop-word inside
    assert list(rule("adafruit-api-key").finds(stop.encode(), RULES.allowlists)) == []


def test_a_rule_runs_only_where_one_of_its_keywords_is() -> None:
    key = "6d2FabeB6ADd229Bc199FabA28fD3efb57dF0bD3"  # gitleaks' sourcegraph tp:002
    assert find(f"commit {key} broke it") == []
    assert [f.kind for f in find(f"sourcegraph: {key}")] == ["sourcegraph"]


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


def test_evidence_in_varied_prose_beside_every_vendor_name_is_untouched() -> None:
    """SHAs, digests, image references, UUIDs, request ids, base64 that decodes to no secret,
    versions and URLs, in six sentences beside each of gitleaks' vendor names ("Calling
    sourcegraph failed with 9fceb02…"): none is flagged. All failures at once."""
    negatives = secret_cases.negatives()
    assert len(negatives) > 10_000 and len(secret_cases.vendors()) == len(RULES.families)
    touched = [(kind, text, [text[f.start : f.end] for f in find(text)]) for kind, text in negatives if find(text)]
    assert touched == [], f"{len(touched)}: {touched[:10]}"


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
