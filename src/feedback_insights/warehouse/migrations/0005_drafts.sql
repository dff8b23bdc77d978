-- Drafted issues, their review, what was filed on GitHub and told to collectors.

CREATE SEQUENCE draft_ids START 1;

-- One draft per cluster, ever: a cluster that grows gets its draft refreshed, not a second one.
CREATE TABLE drafts (
    id              INTEGER PRIMARY KEY DEFAULT nextval('draft_ids'),
    cluster_id      INTEGER NOT NULL UNIQUE,
    status          VARCHAR NOT NULL DEFAULT 'pending',  -- pending | approved | rejected | filed
    title           VARCHAR NOT NULL,
    body            VARCHAR NOT NULL,
    labels          VARCHAR[] NOT NULL,
    workaround      VARCHAR,            -- written by a maintainer, never taken from a report
    drafted_by      VARCHAR NOT NULL,   -- template | llm
    llm_model       VARCHAR,
    prompt_sha256   VARCHAR,
    response_sha256 VARCHAR,
    llm_error       VARCHAR,            -- why the LLM draft was not used (the template one was)
    accounts        INTEGER NOT NULL,   -- demand when the text was last (re)drafted
    reports         INTEGER NOT NULL,
    blocking_reports INTEGER NOT NULL,
    edited          BOOLEAN NOT NULL DEFAULT false,  -- a maintainer changed the text: keep it
    reviewed_by     VARCHAR,
    reviewed_at     TIMESTAMPTZ,
    reject_reason   VARCHAR,
    repo            VARCHAR,
    issue_number    INTEGER,
    issue_url       VARCHAR,
    filed_at        TIMESTAMPTZ,
    known_status    VARCHAR,            -- acknowledged | planned | in_progress | fixed | wont_fix
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);

CREATE SEQUENCE draft_action_ids START 1;

-- Who did what to a draft, and what the pipeline did (drafted, refreshed, filed, status).
CREATE TABLE draft_actions (
    id          INTEGER PRIMARY KEY DEFAULT nextval('draft_action_ids'),
    draft_id    INTEGER NOT NULL,
    action      VARCHAR NOT NULL,
    actor       VARCHAR NOT NULL,
    acted_at    TIMESTAMPTZ NOT NULL,
    detail      JSON
);

-- Every LLM call, by hash only: what was asked and answered can be proven without storing it.
CREATE TABLE llm_calls (
    cluster_id      INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    model           VARCHAR NOT NULL,
    prompt_sha256   VARCHAR NOT NULL,
    response_sha256 VARCHAR,
    outcome         VARCHAR NOT NULL,   -- ok | invalid | error
    error           VARCHAR,
    called_at       TIMESTAMPTZ NOT NULL
);

-- The known_issue each collector holds: re-sent when what we would send changes.
CREATE TABLE known_issue_deliveries (
    draft_id        INTEGER NOT NULL,
    collector       VARCHAR NOT NULL,
    payload_sha256  VARCHAR,            -- of the last payload the collector accepted
    status          VARCHAR,
    delivered_at    TIMESTAMPTZ,
    error           VARCHAR,            -- the last failure, cleared by a success
    PRIMARY KEY (draft_id, collector)
);
