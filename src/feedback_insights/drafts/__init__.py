"""The drafting stage: a GitHub issue drafted per cluster that crosses a demand threshold,
reviewed by a maintainer before it is filed.

- the stage (:func:`draft_clusters`) and what a draft is made from (:func:`draft_input`);
- composition from templates or with an LLM (:func:`template_draft`, :func:`llm_draft`), the
  body and title rendered from Jinja2 templates with every report's text neutralised
  (:mod:`.neutralise`) and the hidden marker that ties an issue to its cluster;
- review (approve, reject, edit) and the stateless preview of a file of records;
- unfiled clusters that look like a filed problem (:func:`lookalikes`), by the measure collectors
  tell agents "known issue" with;
- maintainers' corrections of the clusters, with what follows for their drafts
  (:func:`merge_clusters`, :func:`split_cluster`, :func:`move_records`, :func:`ignore_cluster`, :func:`rebuild_clusters`,
  :func:`rename_cluster`), their undo (:func:`undo_correction`) and a merge's confirmation (:func:`merge_preview`).
"""

from . import neutralise
from ._compose import Draft, LLMCall, estimate_tokens, llm_draft, parse_answer, prompt_messages, template_draft
from ._corrections import (
    Correction,
    ignore_cluster,
    merge_clusters,
    merge_preview,
    move_records,
    rebuild_clusters,
    rename_cluster,
    split_cluster,
    undo_correction,
    unmerge_cluster,
)
from ._inputs import EVIDENCE_FIELDS, DraftInput, Turn, draft_input, turn
from ._llm import ChatClient, LLMError
from ._lookalikes import Lookalike, lookalikes
from ._marker import cluster_of, marker, update_marker
from ._meaning import Meaning, cluster_meanings, recognised, vector_space
from ._preview import PreviewError, preview_input, read_records
from ._quotes import Quoted, QuoteError, quote_report
from ._render import MAX_BODY, Markdown, render_body, render_emptied, render_title, render_update
from ._review import (
    DRAFT_STATUSES,
    MAX_LABELS,
    MAX_TITLE,
    MAX_WORKAROUND,
    ReviewError,
    approve,
    cluster_drafts,
    edit_form,
    get_draft,
    history,
    list_drafts,
    parse_form,
    reject,
    save_edit,
    save_fields,
)
from ._stage import (
    PIPELINE_ACTOR,
    DraftError,
    DraftRun,
    crosses_threshold,
    draft_cluster,
    draft_clusters,
    grew_materially,
    record_action,
    redraft_erased,
)

#: The drafts, each one's history, the reports a maintainer quoted into one, and the drafting
#: LLM's calls (hashes only).
TABLES = frozenset({"drafts", "draft_actions", "draft_quotes", "llm_calls"})

__all__ = [
    "QuoteError",
    "Quoted",
    "quote_report",
    "TABLES",
    "DRAFT_STATUSES",
    "EVIDENCE_FIELDS",
    "MAX_BODY",
    "MAX_LABELS",
    "MAX_TITLE",
    "MAX_WORKAROUND",
    "PIPELINE_ACTOR",
    "ChatClient",
    "Correction",
    "Draft",
    "DraftError",
    "DraftInput",
    "DraftRun",
    "LLMCall",
    "LLMError",
    "Lookalike",
    "Markdown",
    "Meaning",
    "PreviewError",
    "ReviewError",
    "approve",
    "cluster_drafts",
    "cluster_meanings",
    "cluster_of",
    "crosses_threshold",
    "draft_cluster",
    "draft_clusters",
    "draft_input",
    "turn",
    "Turn",
    "edit_form",
    "estimate_tokens",
    "get_draft",
    "grew_materially",
    "history",
    "ignore_cluster",
    "list_drafts",
    "llm_draft",
    "lookalikes",
    "marker",
    "merge_clusters",
    "merge_preview",
    "rebuild_clusters",
    "rename_cluster",
    "move_records",
    "neutralise",
    "parse_answer",
    "parse_form",
    "preview_input",
    "prompt_messages",
    "read_records",
    "recognised",
    "record_action",
    "redraft_erased",
    "reject",
    "render_body",
    "render_emptied",
    "render_title",
    "render_update",
    "save_edit",
    "save_fields",
    "split_cluster",
    "undo_correction",
    "unmerge_cluster",
    "template_draft",
    "update_marker",
    "vector_space",
]
