"""Privacy: secrets and personal data redacted before anything is stored, accounts pseudonymised.

:class:`Redactor` scrubs one record (typed placeholders, counts by type); :class:`Pseudonymiser`
turns an account into a keyed HMAC pseudonym, so demand is counted by distinct customers
without knowing who they are.
"""

from ._engine import Redactor, find, scrub_json, scrub_text
from ._pseudonymise import Pseudonymiser, is_pseudonym
from ._rules import ACCOUNT_KEYS, DETECTORS, PLACEHOLDER, Detector, Finding, is_account_key, is_secret_key

__all__ = [
    "ACCOUNT_KEYS",
    "DETECTORS",
    "PLACEHOLDER",
    "Detector",
    "Finding",
    "Pseudonymiser",
    "Redactor",
    "find",
    "is_account_key",
    "is_pseudonym",
    "is_secret_key",
    "scrub_json",
    "scrub_text",
]
