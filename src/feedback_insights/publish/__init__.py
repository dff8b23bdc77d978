"""The publishing stage: approved drafts filed on GitHub exactly once; issue state read back;
then every sink told (known_issue entries to collectors, filed in-session rows written back);
issues whose clusters a maintainer merged closed as duplicates of the survivor's."""

from ._duplicates import DuplicateRun, duplicate_comment, mark_duplicates
from ._erasure import AmbiguousRecord, BodySync, ForgetRun, ToForget, forget, records_to_forget, resync_erased
from ._github import GitHubError, IssueState, IssueTracker
from ._known_issues import deliver_known_issues, fingerprints, known_issue, payloads
from ._sinks import Sink, SinkResult
from ._stage import PublishRun, publish, publish_configured
from ._write_back import write_back

#: What publishing did: rows written back to their source, known_issue entries delivered, and
#: the demand-update comments posted on filed issues.
TABLES = frozenset({"write_backs", "known_issue_deliveries", "update_comments"})

__all__ = [
    "TABLES",
    "AmbiguousRecord",
    "BodySync",
    "DuplicateRun",
    "ForgetRun",
    "GitHubError",
    "IssueState",
    "IssueTracker",
    "PublishRun",
    "Sink",
    "SinkResult",
    "ToForget",
    "deliver_known_issues",
    "duplicate_comment",
    "fingerprints",
    "forget",
    "known_issue",
    "mark_duplicates",
    "payloads",
    "publish",
    "publish_configured",
    "records_to_forget",
    "resync_erased",
    "write_back",
]
