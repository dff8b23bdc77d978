"""Scrubbing: every covered secret and personal datum goes, the evidence stays."""

from __future__ import annotations

import base64
import html
import json
import os
import random
import re
import string
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from feedback_insights.config import embedded_default
from feedback_insights.core import MAX_DEPTH
from feedback_insights.ingest import RawItem, ingest, process
from feedback_insights.privacy import Pseudonymiser, Redactor, find, is_pseudonym, scrub_json, scrub_text
from feedback_insights.warehouse import Warehouse

from .conftest import SAMPLE, SHARED, run_cli, write_jsonl

ALNUM = string.ascii_letters + string.digits


def luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        digits = body + check
        total = sum((d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 else d for i, d in enumerate(map(int, reversed(digits))))
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def iban(rng: random.Random) -> str:
    bban = "WEST" + "".join(rng.choice(string.digits) for _ in range(14))
    numeric = "".join(str(int(c, 36)) for c in bban + "GB00")
    return f"GB{98 - int(numeric) % 97:02d}{bban}"


def rand(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


#: One generator per covered format: (kind it must be found as, a fresh fake value).
FORMATS: dict[str, Any] = {
    "openai_key": lambda r: "sk-proj-" + rand(r, 48),
    "anthropic_key": lambda r: "sk-ant-api03-" + rand(r, 93, ALNUM + "_-") + "AA",
    "github_token": lambda r: "ghp_" + rand(r, 36),
    "github_fine_grained": lambda r: "github_pat_" + rand(r, 22) + "_" + rand(r, 59),
    "aws_access_key": lambda r: "AKIA" + rand(r, 16, string.ascii_uppercase + string.digits),
    "aws_secret": lambda r: "aws_secret_access_key=" + rand(r, 40, ALNUM + "/+"),
    "stripe_key": lambda r: "sk_live_" + rand(r, 24),
    "slack_token": lambda r: f"xoxb-{rand(r, 12, string.digits)}-{rand(r, 12, string.digits)}-{rand(r, 24)}",
    "google_api_key": lambda r: "AIza" + rand(r, 35, ALNUM + "_-"),
    "sendgrid_key": lambda r: "SG." + rand(r, 22) + "." + rand(r, 43),
    "npm_token": lambda r: "npm_" + rand(r, 36),
    "huggingface_token": lambda r: "hf_" + rand(r, 34),
    "jwt": lambda r: "eyJ" + rand(r, 30, ALNUM + "_-") + ".eyJ" + rand(r, 40, ALNUM + "_-") + "." + rand(r, 43, ALNUM + "_-"),
    "private_key": lambda r: "-----BEGIN RSA PRIVATE KEY-----\n" + rand(r, 64, ALNUM + "+/") + "\n-----END RSA PRIVATE KEY-----",
    "bearer": lambda r: "Authorization: Bearer " + rand(r, 32, ALNUM + "._-"),
    "basic": lambda r: "Authorization: Basic " + rand(r, 24, ALNUM + "+/") + "==",
    "password": lambda r: "password=" + rand(r, 12, ALNUM + "!#%"),
    "url_credentials": lambda r: f"postgres://admin:{rand(r, 14)}@db.example.com:5432/app",
    "query_secret": lambda r: "https://api.example.com/v1/items?api_key=" + rand(r, 32),
    "credit_card": lambda r: luhn_complete("4", 16, r),
    "iban": iban,
    "email": lambda r: rand(r, 8, string.ascii_lowercase) + "@example.com",
    "phone": lambda r: f"+44 20 {rand(r, 4, string.digits)} {rand(r, 4, string.digits)}",
    "us_phone": lambda r: f"({r.randint(201, 989)}) {r.randint(201, 989)}-{rand(r, 4, string.digits)}",
    "ipv4": lambda r: f"{r.randint(11, 223)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}",
    "ipv6": lambda r: "2001:db8:" + ":".join(f"{r.randint(0, 65535):x}" for _ in range(5)) + ":a1",
    "us_ssn": lambda r: f"{r.randint(100, 665)}-{r.randint(10, 99)}-{r.randint(1000, 9999)}",
}

#: The secret part of each generated value: what must not survive.
def secret_part(name: str, value: str) -> str:
    if name in ("aws_secret", "password", "query_secret"):
        return value.rsplit("=", 1)[1]
    if name in ("bearer", "basic"):
        return value.split()[-1]
    if name == "url_credentials":
        return value.split("//")[1].split("@")[0].split(":")[1]
    return value


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_covered_format_is_redacted(name: str) -> None:
    rng = random.Random(name)
    for _ in range(20):
        value = FORMATS[name](rng)
        text = f"Tried again with {value} and it failed (req_8f2c1a9b)."
        scrubbed, counts = scrub_text(text)
        assert secret_part(name, value) not in scrubbed, (name, value, scrubbed)
        assert "req_8f2c1a9b" in scrubbed and counts


EVIDENCE = [
    "trace d4bd169f-7d1e-45cb-921e-2828d85d3b64 on message 06344814-6e21-40c0-a923-2003608d6511",
    "request_id req_8f2c1a9b, RFC-026 request req-1718500000000, record fb_01JAX3ZK7Q8W2M4N6P9R",
    "commit 8b1118b376c313ed420e5133ba91307817ed52c2 broke it; see 7391ac8",
    "at 2026-09-28T10:04:11Z (ts 1786413479223), again 2026-10-05 09:00",
    "GET /v2/orders?cursor=abc&page=2 returned HTTP 429, then 500 after 30s",
    "POST /contacts/export with created_after=2026-09-21 → 400",
    "sdk v1.4.0 on claude-opus-5 and gpt-5.1, python 3.11.7",
    "walked 1500 records in 40 calls; took 1234 ms; 705 companies; 11 of 19 empty",
    "page_token=CiAKGjBhYjEyMzQ1Njc4OTAxMjM0NTY3ODkw next_page_token: abcdef1234567890",
    "session_id=sess_42 and max_tokens=4096, token_count: 1200",
    "the tokenizer splits snake_case; hiring_role is ignored",
    "order #4532015112830367 (fails Luhn) and account 1234567890",
    "IBAN-like GB82WEST12345698765431 with a bad checksum; SSN-like 000-12-3456",
    "version 2.14.1 and 10.0.3.1-beta; listen on :8080; ratio 0.82",
    "Cookie: theme=dark; lang=en; page=2",
    # A UUID whose first group is all digits; "call" the noun before a count.
    "the call failed, evidence 11748986-f989-4a4d-a3ad-ffb0e7153601 (trace attached)",
    "the call failed, took 1350748 µs; each call returned 4608006 rows",
]


@pytest.mark.parametrize("text", EVIDENCE)
def test_evidence_survives_untouched(text: str) -> None:
    assert find(text) == [], [text[f.start : f.end] for f in find(text)]


def test_the_same_value_gets_the_same_placeholder_within_a_record() -> None:
    record = {
        "summary": "Contact jane.doe@example.com or bob@example.com",
        "detail": "jane.doe@example.com again",
        "evidence": {"request": {"to": "bob@example.com"}},
    }
    scrubbed, counts = scrub_json(record)
    assert scrubbed["summary"] == "Contact [REDACTED:email:1] or [REDACTED:email:2]"
    assert scrubbed["detail"] == "[REDACTED:email:1] again"
    assert scrubbed["evidence"]["request"]["to"] == "[REDACTED:email:2]"
    assert counts == {"email": 2}


def test_secret_named_keys_are_redacted_whole_and_evidence_keys_are_not() -> None:
    value = {
        "password": "hunter2",
        "Authorization": "Token abc",
        "credentials": {"user": "admin", "pin": "1234"},
        "X-Api-Key": "short",
        "session_id": "sess_42",
        "page_token": "CiAKGjBhYj",
        "max_tokens": 4096,
        "token_count": "12",
    }
    scrubbed, counts = scrub_json(value)
    assert scrubbed["password"].startswith("[REDACTED:secret:")
    assert scrubbed["Authorization"].startswith("[REDACTED:secret:")
    assert all(v.startswith("[REDACTED:secret:") for v in scrubbed["credentials"].values())
    assert scrubbed["X-Api-Key"].startswith("[REDACTED:secret:")
    assert {k: scrubbed[k] for k in ("session_id", "page_token", "max_tokens", "token_count")} == {
        "session_id": "sess_42", "page_token": "CiAKGjBhYj", "max_tokens": 4096, "token_count": "12"}
    assert counts == {"secret": 5}


def test_scrubbing_is_idempotent_and_continues_numbering() -> None:
    once, _ = scrub_text("mail a@example.com and b@example.com")
    assert scrub_text(once)[0] == once
    redactor = Redactor()
    assert redactor.text(once + " and c@example.com").endswith("[REDACTED:email:3]")


def test_a_report_is_scrubbed_everywhere_and_its_account_pseudonymised() -> None:
    pseudonymise = Pseudonymiser("k")
    report = {
        "id": "fb_1", "received_at": "2026-09-28T10:04:11Z", "service": "svc", "account": "acct_raw",
        "feedback": {"type": "bug", "goal": "Export", "message": "key sk_live_abcdefghijklmnop1234 leaked",
                     "evidence": {"response_excerpt": "sk_live_abcdefghijklmnop1234"}},
    }
    processed = process([RawItem(report, "line 1")], collector="c", source_uri="u",
                        received_at="2026-11-30T00:00:00Z", pseudonymise=pseudonymise)
    (record,) = processed.records
    assert record["redactions"] == {"stripe_key": 1}  # type: ignore[typeddict-item]
    assert record["account"] == record["original"]["account"] == pseudonymise("acct_raw")
    assert is_pseudonym(record["account"])
    assert "sk_live_" not in json.dumps(record)
    assert record["summary"] == "key [REDACTED:stripe_key:1] leaked"
    assert record["evidence"] == {"response_excerpt": "[REDACTED:stripe_key:1]"}
    assert processed.raw_texts == [None]  # the text as received is not kept


def test_pseudonyms_are_stable_keyed_and_distinct() -> None:
    a, b = Pseudonymiser("key-1"), Pseudonymiser("key-2")
    assert a("acct_1") == a("acct_1") != a("acct_2")
    assert a("acct_1") != b("acct_1")
    with pytest.raises(ValueError):
        Pseudonymiser("")


json_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=40))
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_scrubbing_never_raises_and_is_idempotent(value: Any) -> None:
    once, counts = scrub_json(value)
    twice, _ = scrub_json(once)
    assert twice == once
    assert all(isinstance(n, int) and n > 0 for n in counts.values())


WORDS = ["the", "export", "failed", "with", "GET", "/v2/orders", "page", "2", "returned", "500", "see", "logs", ":", "—"]


@st.composite
def planted(draw: st.DrawFn) -> tuple[Any, str]:
    """A random JSON document with one fake secret of a covered format somewhere inside."""
    name = draw(st.sampled_from(sorted(FORMATS)))
    value = FORMATS[name](random.Random(draw(st.integers(0, 10**9))))
    words = draw(st.lists(st.sampled_from(WORDS), max_size=8))
    at = draw(st.integers(0, len(words)))
    text = " ".join([*words[:at], value, *words[at:]])
    document: Any = text
    for key in draw(st.lists(st.sampled_from(["detail", "evidence", "request", "items", "note", "0"]), max_size=4)):
        document = [document, draw(json_leaves)] if key == "items" else {key: document, "other": draw(json_leaves)}
    return document, secret_part(name, value)


@example(("aws_secret_access_key=/iX8xFu/aBARK7DB6uiMnODWpoPoRMYnMV3H2gnJ", "/iX8xFu/aBARK7DB6uiMnODWpoPoRMYnMV3H2gnJ"))
@settings(max_examples=500, deadline=None)
@given(planted())
def test_no_planted_secret_survives_in_any_nested_position(case: tuple[Any, str]) -> None:
    document, secret = case
    scrubbed, _ = scrub_json(document)
    assert secret not in json.dumps(scrubbed, ensure_ascii=False)


def test_no_planted_secret_or_personal_datum_survives_anywhere_in_the_warehouse(tmp_path: Path) -> None:
    config = embedded_default(tmp_path / "feedback.duckdb")
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
    plants = json.loads((SAMPLE / "planted.json").read_text())
    values = plants["secrets"] + plants["pii"]
    assert len(values) >= 20
    # Every table's every value as text, and the file's raw bytes.
    with duckdb.connect(str(config.warehouse.path), read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        dump = "\n".join(repr(row) for t in tables for row in con.execute(f"SELECT * FROM {t}").fetchall())
    raw = (tmp_path / "feedback.duckdb").read_bytes()
    assert "records" in tables and "quarantine" in tables
    for value in values:
        assert value not in dump, value
        assert value.encode() not in raw, value
    # The redactions were counted for the digest.
    with duckdb.connect(str(config.warehouse.path), read_only=True) as con:
        (scrubbed,) = con.execute("SELECT count(*) FROM records WHERE redactions::VARCHAR <> '{}'").fetchone()
    assert scrubbed >= 25


def test_the_prefilter_never_changes_a_result() -> None:
    """Each rule's RE2 hint must match every text the rule itself can match."""
    texts = [json.loads(line)["text"] for line in (SHARED / "data" / "pii_cases.jsonl").read_text().splitlines()]
    texts += EVIDENCE
    rng = random.Random(7)
    texts += [f"see {make(rng)} here" for make in FORMATS.values() for _ in range(5)]
    for name in ("afp_records.jsonl", "afs.jsonl", "sep2369.jsonl"):
        texts += (SAMPLE / name).read_text().splitlines()
    assert len(texts) > 2000
    for text in texts:
        assert find(text) == find(text, prefilter=False), text


@pytest.mark.parametrize(
    "text",
    ["see token: " + "-".join(["A"] * 60) + "!", "a" * 50_000 + "@!", "a@" + "b." * 20_000 + "1", "1 " * 30_000],
)
def test_adversarial_text_is_scanned_in_linear_time(text: str) -> None:
    """Each of these took seconds to hours with a backtracking pattern; now they must simply
    come back (unchanged: there is nothing to redact)."""
    assert scrub_text(text) == (text, {})


def test_numbers_keys_and_json_text_are_scrubbed_too() -> None:
    pseudonymise = Pseudonymiser("k")
    value = {
        "password": 12345678,
        "card": 4111111111111111,
        "count": 1500,
        "jane.doe@example.com": "owner",
        "context": json.dumps({"sessionToken": "opensesame", "user_id": "u-123", "dictation": "call +44 20 7946 0958"}),
    }
    redactor = Redactor(pseudonymise)
    scrubbed = redactor.value(value)
    assert scrubbed["password"].startswith("[REDACTED:secret:") and scrubbed["card"] == "[REDACTED:credit_card:1]"
    assert scrubbed["count"] == 1500 and "[REDACTED:email:1]" in scrubbed
    context = json.loads(scrubbed["context"])
    assert context["sessionToken"].startswith("[REDACTED:secret:")
    assert context["user_id"] == pseudonymise("u-123")
    assert context["dictation"] == "call [REDACTED:phone:1]"


# -- forms that leaked -------------------------------------------------------------------------

ZW = "\u200b"  # zero-width space
_rng = random.Random("leaks")
_JWT = FORMATS["jwt"](_rng)
_H, _P, _S = _JWT.split(".")
_PEM_LINES = [rand(_rng, 64, ALNUM + "+/") for _ in range(6)]
_B64 = __import__("base64").b64encode


#: (text as an agent pasted it, the parts of it that must not survive).
LEAKS: dict[str, tuple[str, list[str]]] = {
    # Hosts without a dot: with one, "password@host.tld" was caught as an email by chance.
    "url_empty_user_redis": ("cache at redis://:S3cretPassw0rd@cache:6379/0 timed out", ["S3cretPassw0rd"]),
    "url_empty_user_postgres": ("DATABASE_URL is postgres://:pw4Xk92Lq@db/app", ["pw4Xk92Lq"]),
    "url_password_with_slash": ("connect postgres://app:pa/ss+W0rd9@db.example.com:5432/app failed", ["pa/"]),
    "url_password_with_slash_no_dot": ("connect postgres://app:Xy/9Lk2q@db:5432/app failed", ["Xy/9Lk2q", "9Lk2q"]),
    "jwt_split_across_lines": (f"token was\n{_H}\n.{_P}\n.{_S}\nthen 401", [_H, _P, _S]),
    "jwt_split_by_spaced_dots": (f"Authorization header {_H} . {_P} . {_S} rejected", [_H, _P, _S]),
    "jwt_segment_wrapped": (f"jwt:\n{_H}.{_P[:20]}\n{_P[20:]}.{_S}", [_H, _P[:20], _P[20:], _S]),
    "query_pass": ("GET https://api.example.com/login?user=bob&pass=hunter22 → 302", ["hunter22"]),
    "query_pw": ("redirected to /auth?pw=Tr0ub4dor&next=/home", ["Tr0ub4dor"]),
    "query_key": ("called https://maps.example.com/geo?key=Qk7Yp2Lm9Xv4Rt8Wz3Nb&q=berlin", ["Qk7Yp2Lm9Xv4Rt8Wz3Nb"]),
    "query_percent_encoded": (
        "callback=https%3A%2F%2Fapp.example.com%2Fcb%3Ftoken%3DxK9vLm2Qp7Rt4Wz8Nb3Y&state=1",
        ["xK9vLm2Qp7Rt4Wz8Nb3Y"],
    ),
    "stripe_webhook_secret": ("signing secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw broke", ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]),
    "slack_refresh_token": ("refresh with xoxe-1-My1tZW1iZXJzaGlwLXRva2VuLWZha2UtMTIzNDU2 failed", ["My1tZW1iZXJzaGlwLXRva2VuLWZha2UtMTIzNDU2"]),
    "slack_config_token": ("used xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTAtZmFrZS10b2tlbg for the app", ["xoxe.", "Mi0yLTEyMzQ1Njc4OTAtZmFrZS10b2tlbg"]),
    "bare_basic_blob": (f"the header value was {_B64(b'deploy-bot:Zq8!rT2kLm').decode()} and it failed",
                        [_B64(b"deploy-bot:Zq8!rT2kLm").decode()]),
    "pem_body_without_begin": ("here is the key:\n" + "\n".join(["MIIEpAIBAAKCAQEA" + _PEM_LINES[0][16:], *_PEM_LINES[1:]])
                               + "\n-----END RSA PRIVATE KEY-----\nthanks", _PEM_LINES[1:]),
    "pem_body_without_begin_or_end": ("key body MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + _PEM_LINES[0] + "\n" + _PEM_LINES[1]
                                      + " did not parse", [_PEM_LINES[0], _PEM_LINES[1]]),
    "zero_width_split_stripe": (f"key sk_live_{ZW}4eC39HqLyjWDarjtT1zdp7dc leaked", ["4eC39HqLyjWDarjtT1zdp7dc"]),
    "zero_width_split_github": ("ghp_" + ZW.join(["aB3dE5fG7h", "J9kL1mN3pQ", "5rS7tU9vW1", "xY3z"]) + " in logs",
                                ["aB3dE5fG7h", "J9kL1mN3pQ", "5rS7tU9vW1"]),
    "zero_width_split_email": (f"mail jane.doe{ZW}@example{ZW}.com please", ["jane.doe", "example"]),
}


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


_FB, _HVB, _SM = "EAAM" + rand(_rng, 110), "hvb." + rand(_rng, 150), "sm_aat_" + rand(_rng, 16)
_API_KEY = rand(_rng, 32)
_B64_JSON = _B64(json.dumps({"api_key": _API_KEY}).encode()).decode()
_B64_PRETTY = _B64(json.dumps({"service": "acme", "auth": {"client": "cli", "api_key": _API_KEY}}, indent=2).encode()).decode()
_B64URL_TEXT = base64.urlsafe_b64encode(b"user=deploy-bot&password=Zq8!rT2kLm-9 ok").decode().rstrip("=")
_OPENAI = "sk-proj-" + rand(_rng, 40)
#: Forms found leaking in issue 28 (measured): a token ended by prose punctuation, secret-named
#: environment variables, "&" inside a password, base64 of what carries a secret, full-width and
#: HTML-entity spellings.
LEAKS |= {
    "paren_after_facebook_page_token": (f"the page token (see {_FB}) expired", [_FB[4:]]),
    "comma_after_vault_batch_token": (f"vault gave {_HVB}, then 403", [_HVB[4:]]),
    "parens_around_settlemint_token": (f"token ({_SM}) rejected", [_SM[7:]]),
    "period_after_settlemint_token": (f"we rotated {_SM}.", [_SM[7:]]),
    "env_hmac_key": ("set HMAC_KEY=hunter2hunter2 in the env", ["hunter2hunter2"]),
    "env_pgpassword": ("ran with PGPASSWORD=hunter22 psql -h db", ["hunter22"]),
    "env_db_pass_quoted": ('export DB_PASS="correct horse" then', ["correct horse"]),
    "env_vars_nul_separated": ("FEEDBACK_INSIGHTS_HMAC_KEY=Qw8Lm2Kp9Xv4Rt8Wz3NbY\x00PATH=/usr/bin\x00HOME=/root",
                               ["Qw8Lm2Kp9Xv4Rt8Wz3NbY"]),
    "password_with_ampersand": ("I set password=abc&def123 and it failed", ["abc", "def123"]),
    "query_password_with_ampersand": ("GET /login?password=abc&def123&next=/home → 302", ["abc", "def123"]),
    # Caught before (the URL rule reads to the "@"); kept beside its prose twin.
    "url_password_with_ampersand": ("connect postgres://u:p&ss@h failed", ["p&ss"]),
    "base64_of_json_with_api_key": (f"config blob {_B64_JSON} rejected", [_B64_JSON[:24], _B64_JSON[-24:]]),
    "base64_of_pretty_json_with_api_key": (f"blob:\n{_B64_PRETTY}\nthanks", [_B64_PRETTY[:24], _B64_PRETTY[-24:]]),
    "base64url_of_text_with_password": (f"state={_B64URL_TEXT} lost", [_B64URL_TEXT[:24]]),
    "fullwidth_stripe_key": (f"key {_fullwidth('sk_live_4eC39HqLyjWDarjtT1zdp7dc')} leaked", ["4eC39HqLyjWDarjtT1zdp7dc"]),
    "html_decimal_entity_stripe_key": ("key &#115;k_live_4eC39HqLyjWDarjtT1zdp7dc leaked", ["4eC39HqLyjWDarjtT1zdp7dc"]),
    "html_hex_entities_openai_key": (f"key &#x73;&#x6b;{_OPENAI[2:]} leaked", [_OPENAI[8:]]),
    "html_named_entities_json": (f"config {{&quot;api_key&quot;: &quot;{_API_KEY}&quot;}}", [_API_KEY]),
}


def _as_read(text: str) -> str:
    """What a person (or a system it is pasted into) reads: entities decoded, full-width folded."""
    return unicodedata.normalize("NFKC", html.unescape(text))


@pytest.mark.parametrize("name", sorted(LEAKS))
def test_forms_that_leaked_are_redacted(name: str) -> None:
    text, secrets = LEAKS[name]
    scrubbed, counts = scrub_text(text)
    visible = scrubbed.replace(ZW, "")
    assert counts, (name, scrubbed)
    for secret in secrets:
        assert secret not in visible and secret not in _as_read(visible), (name, secret, scrubbed)
    assert scrub_text(scrubbed)[0] == scrubbed  # still idempotent


def _hex(rng: random.Random, n: int) -> str:
    return rng.randbytes(n // 2 + 1).hex()[:n]


#: Clean text between the tokens, so that a megabyte holds thousands of finds, not hundreds of
#: thousands (each find costs what it costs; the test is about the text's length).
_FILLER = "the export failed again after 30s; see /v2/orders?page=2 "


def _non_ascii_tokens(rng: random.Random, n: int) -> tuple[str, list[str]]:
    tokens = [f"sm_aat_{_hex(rng, 16)}" for _ in range(n)]
    return "".join(f"é {t} {_FILLER}" for t in tokens), tokens[::97]


def _placeholders_beside_finds(rng: random.Random, n: int) -> tuple[str, list[str]]:
    emails = [f"u{_hex(rng, 8)}@example.com" for _ in range(n)]
    return "".join(f"[REDACTED:email:{i}] {e} {_FILLER}" for i, e in enumerate(emails, 1)), emails[::97]


def _encodings(rng: random.Random, n: int) -> tuple[str, list[str]]:
    chunks, secrets = [], []
    for _ in range(n // 20):
        key = _hex(rng, 24)
        blob = _B64(json.dumps({"api_key": key + "b64"}).encode()).decode()
        chunks.append(f"&#115;k_live_{key}E (x) {_fullwidth('sk_live_' + key)}F, {blob}. HMAC_KEY={key}H "
                      f"password=a&{key}P {'&amp;' * 20} {'ｗ' * 30} {_hex(rng, 40)} d4bd169f-7d1e-45cb-921e-2828d85d3b64 "
                      + _FILLER * 24)
        secrets += [key + "E", key + "F", blob, key + "H", key + "P"]
    return "".join(chunks), secrets[::97]


def _no_secret_beside_secrets(rng: random.Random, n: int) -> tuple[str, list[str]]:
    """Finds that hold no secret (a placeholder, a reference, a mask, digests beside a vendor's
    name) around a real token: each is judged on its own value and a few characters around it."""
    chunks, secrets = [], []
    for _ in range(n // 5):
        real, sha = "ghp_" + rand(rng, 36), _hex(rng, 40)
        chunks.append(f"ghp_{'x' * 36} API_KEY=${{API_KEY}} key sk_live_51Hq**** sourcegraph logged {sha}, "
                      f"md5:{sha[:32]} then {real} " + _FILLER * 3)
        secrets.append(real)
    return "".join(chunks), secrets[::97]


#: Lines of about a megabyte with thousands of finds, each also at an eighth of its length:
#: every stage must stay linear (a find's character offset, the line its allow-lists see, the
#: placeholders already in the text, the decoded views), so the long line takes about eight
#: times as long as the short one (under 16), not sixty-four.
HUGE: dict[str, Callable[[random.Random, int], tuple[str, list[str]]]] = {
    "non_ascii_text_with_a_token_every_line": _non_ascii_tokens,
    "placeholders_beside_new_finds": _placeholders_beside_finds,
    "encoded_tokens_entities_full_width_base64_env": _encodings,
    "finds_that_hold_no_secret_beside_real_tokens": _no_secret_beside_secrets,
}
_HUGE_FINDS = 12_000


def _scrubbed_in(text: str) -> tuple[float, str]:
    started = time.perf_counter()
    scrubbed, _ = scrub_text(text)
    return time.perf_counter() - started, scrubbed


@pytest.mark.parametrize("name", sorted(HUGE))
def test_a_huge_hostile_line_is_scrubbed_in_linear_time(name: str) -> None:
    rng = random.Random(name)
    short, _ = HUGE[name](rng, _HUGE_FINDS // 8)
    text, secrets = HUGE[name](rng, _HUGE_FINDS)
    assert len(text) > 900_000 and "\n" not in text
    short_seconds = min(_scrubbed_in(short)[0] for _ in range(3))
    bound = 16 * max(short_seconds, 0.05)  # 8× the text: linear is ~8×, quadratic ~64×
    # Timed again (up to three times) only when over the bound: another job on the machine can
    # slow one run, never every run 8× more than linear.
    for _ in range(3):
        seconds, scrubbed = _scrubbed_in(text)
        if seconds < bound:
            break
    assert seconds < bound, f"{seconds:.1f} s for {len(text):,} characters, {short_seconds:.2f} s for an eighth"
    read = _as_read(scrubbed)
    for secret in secrets:
        assert secret not in scrubbed and secret not in read, secret


def test_urls_that_are_not_credentials_survive() -> None:
    for text in ["see https://example.com:8080/users/@me for it", "GET http://host:443/a/b@c returned 404",
                 "ssh://git@github.com/org/repo.git", "mailto:ops@example.com"]:
        assert all(f.kind != "url_credentials" for f in find(text)), text


# -- identity fields ---------------------------------------------------------------------------

#: 18-19 digit snowflake-style ids that pass the Luhn check: the ids that used to become
#: placeholders.
LUHN_IDS = [luhn_complete(prefix, length, random.Random(prefix)) for prefix, length in (("12", 19), ("13", 19), ("41", 18))]
#: A 10-digit id shaped like a North American phone number.
NANP_ID = "4155550132"


def test_luhn_ids_pass_luhn_and_were_scrubbed_as_text() -> None:
    """The premise: as free text these numbers are card-shaped and phone-shaped (ten bare digits
    are redacted as a phone number: one left in would be a leak)."""
    assert {f.kind for i in LUHN_IDS for f in find(i)} == {"credit_card"}
    assert [f.kind for f in find(NANP_ID)] == ["phone"]


def test_a_phone_number_is_read_beside_a_phone_word_and_calling_an_api_is_not_one() -> None:
    for text in (f"call me on {NANP_ID}", f"Fax: {NANP_ID}", "(415) 555-0132", "415.555.0132"):
        assert [f.kind for f in find(text)] == ["phone"], text
    assert find("Calling github failed with 20231902 (retried twice).") == []  # "calling" the API


def _afp(record_id: str, **feedback: Any) -> dict[str, Any]:
    return {"id": record_id, "received_at": "2026-10-01T10:00:00Z", "service": "svc", "account": "acct_1",
            "source": "http", "feedback": {"type": "bug", "goal": "export", "message": "it failed", **feedback}}


@pytest.mark.parametrize("record_id", [*LUHN_IDS, NANP_ID])
def test_identity_fields_are_never_scrubbed(record_id: str) -> None:
    report = _afp(record_id, session_id=record_id, request_id=record_id)
    report["metadata"] = {"id": record_id}
    sep = {"jsonrpc": "2.0", "id": int(record_id), "method": "feedback/submit",
           "params": {"generatedAt": "2026-10-01T10:00:00Z", "items": [{"id": record_id, "observation": record_id}]}}
    redactor = Redactor(Pseudonymiser("k"))
    scrubbed = redactor.value(report)
    assert (scrubbed["id"], scrubbed["feedback"]["session_id"], scrubbed["feedback"]["request_id"]) == (record_id,) * 3
    assert scrubbed["metadata"]["id"] != record_id  # metadata is scrubbed like any text
    scrubbed_sep, _ = scrub_json(sep)
    assert scrubbed_sep["id"] == int(record_id) and scrubbed_sep["params"]["items"][0]["id"] == record_id
    assert scrubbed_sep["params"]["items"][0]["observation"] != record_id  # free text is


def test_records_with_luhn_ids_are_all_stored_not_already_stored(tmp_path: Path) -> None:
    from .test_ingest import files_config

    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "a.jsonl").write_text("\n".join(json.dumps(_afp(i)) for i in LUHN_IDS) + "\n")
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        stored = sorted(i for (i,) in wh.con.execute("SELECT id FROM records").fetchall())
    assert (summary.counts.new, summary.counts.already) == (3, 0)
    assert stored == sorted(LUHN_IDS)


def test_an_identifier_carrying_a_secret_keeps_one_stable_identity() -> None:
    pseudonymise = Pseudonymiser("k")
    token = "sk_live_" + "Zt8Kq2Lm9Xv4Rt8Wz3NbYp"
    report = _afp("jane.doe@example.com", session_id=token, message=f"session {token} expired")
    first, again = Redactor(pseudonymise), Redactor(pseudonymise)
    scrubbed, twice = first.value(report), again.value(report)
    assert scrubbed == twice  # the same keyed pseudonym every time: re-ingesting is recognised
    assert re.fullmatch(r"idh_[0-9a-f]{24}", scrubbed["id"]) and re.fullmatch(r"idh_[0-9a-f]{24}", scrubbed["feedback"]["session_id"])
    assert scrubbed["id"] != scrubbed["feedback"]["session_id"] != pseudonymise("jane.doe@example.com")
    assert Pseudonymiser("other")("x") != pseudonymise("x") and Pseudonymiser("other").identifier(token) != pseudonymise.identifier(token)
    assert "jane.doe" not in json.dumps(scrubbed) and token not in json.dumps(scrubbed)
    assert scrubbed["feedback"]["message"] == "session [REDACTED:stripe_key:1] expired"
    assert first.identifiers == 2 and first.counts == {"identifier": 2, "stripe_key": 1}
    assert Redactor(pseudonymise).value(scrubbed) == scrubbed  # idempotent


#: Ids of gitleaks' own cases: they name a rule ("…-password:tp:001"), they carry no secret.
RULE_NAMING_IDS = ["gl:nuget-config-password:tp:001", "gl:hashicorp-tf-password:fp:002", "gl:anthropic-api-key:tp:001",
                   "gl:1password-service-account-token:tp:001"]


@pytest.mark.parametrize("record_id", RULE_NAMING_IDS)
def test_an_id_that_merely_names_a_rule_is_kept(record_id: str) -> None:
    report = {"id": record_id, "message": "hello world", "feedback": {"session_id": record_id}}
    assert scrub_json(report) == (report, {})
    assert Redactor(Pseudonymiser("k")).value(report) == report


def test_the_scrub_command_keeps_ids_and_hashes_those_carrying_personal_data_as_ingest_does(tmp_path: Path) -> None:
    email = "jane.doe@example.com"
    lines = [{"id": "gl:nuget-config-password:tp:001", "message": "hello world"},
             {"id": email, "message": f"mail {email}", "feedback": {"session_id": email}},
             {"id": email, "message": "again"}]
    source = write_jsonl(tmp_path / "in.jsonl", lines)
    env = {k: v for k, v in os.environ.items() if k != "FEEDBACK_INSIGHTS_CONFIG"}

    KEY_ONE, KEY_TWO = "key-one-" + "1" * 24, "key-two-" + "2" * 24  # 32 characters, as a key must be

    def scrubbed(key: str) -> list[dict[str, Any]]:
        done = run_cli("scrub", "-i", str(source), "-o", "-", cwd=tmp_path, env={**env, "FEEDBACK_INSIGHTS_HMAC_KEY": key})
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    first, again, other = scrubbed(KEY_ONE), scrubbed(KEY_ONE), scrubbed(KEY_TWO)
    assert first[0] == {**lines[0], "_redactions": {}}
    hashed = Pseudonymiser(KEY_ONE).identifier(email)
    assert first[1]["id"] == first[1]["feedback"]["session_id"] == first[2]["id"] == hashed  # within a run
    assert first[1]["message"] == "mail [REDACTED:email:1]" and first[1]["_redactions"] == {"email": 1, "identifier": 1}
    assert again == first and other[1]["id"] == Pseudonymiser(KEY_TWO).identifier(email) != hashed  # across runs
    assert "[REDACTED:identifier" not in json.dumps(first) and email not in json.dumps(first)


def test_without_a_key_an_identifier_carrying_a_secret_is_a_placeholder() -> None:
    scrubbed, counts = scrub_json(_afp("jane.doe@example.com"))
    assert scrubbed["id"] == "[REDACTED:identifier:1]" and counts == {"identifier": 1}
    assert scrub_json(scrubbed) == (scrubbed, {"identifier": 1})


def test_an_ingested_record_whose_id_is_an_email_is_kept_under_its_pseudonym(tmp_path: Path) -> None:
    from .test_ingest import files_config

    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "a.jsonl").write_text(json.dumps(_afp("jane.doe@example.com")) + "\n" + json.dumps(_afp("bob@example.com")) + "\n")
    config = files_config(tmp_path, drop)
    with Warehouse(config.warehouse.path) as wh:
        summary = ingest(config, wh)
        ids = [i for (i,) in wh.con.execute("SELECT id FROM records").fetchall()]
        (drop / "b.jsonl").write_text(json.dumps(_afp("jane.doe@example.com")) + "\n")
        again = ingest(config, wh)
    assert summary.counts.new == 2 and len(set(ids)) == 2 and all(i.startswith("idh_") for i in ids)
    assert (again.counts.new, again.counts.already) == (0, 1)


# -- bounded depth -----------------------------------------------------------------------------

SECRET_AT_THE_BOTTOM = "sk_live_" + "Qz7Lm2Kp9Xv4Rt8Wz3NbY"


def deep_json(value: Any) -> str:
    """JSON text of a value of any depth (``json.dumps`` recurses): the test's own writer."""
    out, stack = [], [value]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):  # ("raw", text)
            out.append(node[1])
        elif isinstance(node, dict):
            items = list(node.items())
            stack.append(("raw", "}"))
            for i in range(len(items) - 1, -1, -1):
                stack += [items[i][1], ("raw", ("," if i else "") + json.dumps(items[i][0]) + ":")]
            stack.append(("raw", "{"))
        elif isinstance(node, list):
            stack.append(("raw", "]"))
            for i in range(len(node) - 1, -1, -1):
                stack += [node[i]] + ([("raw", ",")] if i else [])
            stack.append(("raw", "["))
        else:
            out.append(json.dumps(node))
    return "".join(out)


def _nested(levels: int) -> Any:
    """``levels`` of objects and arrays, a secret in the innermost (built without recursion)."""
    value: Any = {"note": f"key {SECRET_AT_THE_BOTTOM}", "password": "hunter22"}
    for level in range(levels - 1):
        value = [value] if level % 2 else {"detail": value}
    return value


@pytest.mark.parametrize("levels", [500, 5000])
@pytest.mark.parametrize("as_text", [False, True])
def test_any_depth_is_scrubbed_without_recursion_error(levels: int, as_text: bool) -> None:
    value = _nested(levels)
    if as_text:
        value = {"context": deep_json(value)}
    scrubbed, counts = scrub_json(value)  # no RecursionError
    text = deep_json(scrubbed)
    assert SECRET_AT_THE_BOTTOM not in text and "hunter22" not in text
    assert counts["stripe_key"] == 1
    if not as_text:  # the first 64 levels keep their structure; the rest is scrubbed JSON text
        node = scrubbed
        for _ in range(MAX_DEPTH - 1):
            node = node["detail"] if isinstance(node, dict) else node[0]
        assert isinstance(node, (dict, list))


def test_scrubbing_at_the_depth_limit_keeps_the_structure() -> None:
    value = _nested(MAX_DEPTH)
    scrubbed, counts = scrub_json(value)
    node = scrubbed
    while isinstance(node, (dict, list)) and "note" not in node:
        node = node["detail"] if isinstance(node, dict) else node[0]
    assert node == {"note": "key [REDACTED:stripe_key:1]", "password": "[REDACTED:secret:1]"}
