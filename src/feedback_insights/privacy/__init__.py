"""Privacy: secrets and personal data redacted before anything is stored, accounts pseudonymised.

:class:`Redactor` scrubs one record (typed placeholders, counts by type; identity fields kept);
:class:`Pseudonymiser` turns an account into a keyed HMAC pseudonym, so demand is counted by
distinct customers without knowing who they are. The rules are ours (:data:`DETECTORS`) and
gitleaks' default set (:func:`gitleaks_rules`, shipped in ``gitleaks/`` with its licence).
"""

from ._engine import Redactor, find, scrub_json, scrub_text
from ._gitleaks import Allowlist, Rule, RuleSet, gitleaks_rules, shannon_entropy
from ._pseudonymise import Pseudonymiser, is_pseudonym
from ._rules import (
    ACCOUNT_KEYS,
    DETECTORS,
    ENVELOPE_CONTAINERS,
    IDENTITY_KEYS,
    PERSONAL_KINDS,
    PLACEHOLDER,
    Detector,
    Finding,
    is_account_key,
    is_secret_key,
    is_secret_kind,
)

#: A keyed fingerprint of the key the warehouse's pseudonyms were made with (never the key).
TABLES = frozenset({"key_fingerprint"})

__all__ = [
    "TABLES",
    "ACCOUNT_KEYS",
    "DETECTORS",
    "ENVELOPE_CONTAINERS",
    "IDENTITY_KEYS",
    "PERSONAL_KINDS",
    "PLACEHOLDER",
    "Allowlist",
    "Detector",
    "Finding",
    "Pseudonymiser",
    "Redactor",
    "Rule",
    "RuleSet",
    "find",
    "gitleaks_rules",
    "is_account_key",
    "is_pseudonym",
    "is_secret_key",
    "is_secret_kind",
    "scrub_json",
    "scrub_text",
    "shannon_entropy",
]
