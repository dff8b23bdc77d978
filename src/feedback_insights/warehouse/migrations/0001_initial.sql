-- The warehouse: canonical records, the quarantine, ingest runs and source cursors.

CREATE SEQUENCE ingest_run_ids START 1;

CREATE TABLE ingest_runs (
    id           INTEGER PRIMARY KEY DEFAULT nextval('ingest_run_ids'),
    started_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ,
    status       VARCHAR NOT NULL,            -- running | ok | failed
    new          INTEGER NOT NULL DEFAULT 0,  -- records stored by this run
    already      INTEGER NOT NULL DEFAULT 0,  -- records seen before (re-delivery): not stored again
    retries      INTEGER NOT NULL DEFAULT 0,  -- new records marked duplicate_of an earlier one
    quarantined  INTEGER NOT NULL DEFAULT 0,
    error        VARCHAR
);

-- Identity is (collector, id). A retry (same service, session_id and content) is stored and
-- points at the first report through duplicate_of: duplicates are demand signal.
CREATE TABLE records (
    collector    VARCHAR NOT NULL,
    id           VARCHAR NOT NULL,
    dialect      VARCHAR NOT NULL,
    service      VARCHAR,
    account      VARCHAR,
    received_at  TIMESTAMPTZ NOT NULL,
    source       VARCHAR NOT NULL,
    lane         VARCHAR NOT NULL,
    category     VARCHAR NOT NULL,
    outcome      VARCHAR,
    severity     VARCHAR,
    summary      VARCHAR,
    goal         VARCHAR,
    detail       VARCHAR,
    tool         VARCHAR,
    method       VARCHAR,
    expected     VARCHAR,
    actual       VARCHAR,
    suggestion   VARCHAR,
    workaround   VARCHAR,
    rating       TINYINT,
    request_id   VARCHAR,
    session_id   VARCHAR,
    trace_id     VARCHAR,
    message_id   VARCHAR,
    agent        JSON,
    evidence     JSON,
    context      JSON,
    metadata     JSON,
    original     JSON NOT NULL,
    content_hash VARCHAR NOT NULL,
    duplicate_of VARCHAR,
    source_uri   VARCHAR,
    run_id       INTEGER NOT NULL,
    ingested_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (collector, id)
);

-- Invalid reports, kept whole with every problem, until a replay after a fix stores them.
CREATE TABLE quarantine (
    id           VARCHAR PRIMARY KEY,         -- q_ + sha256(collector, raw), 12 hex digits
    collector    VARCHAR NOT NULL,
    source_uri   VARCHAR,
    position     VARCHAR,
    dialect      VARCHAR,
    raw          VARCHAR NOT NULL,
    problems     JSON NOT NULL,
    first_seen   TIMESTAMPTZ NOT NULL,
    last_seen    TIMESTAMPTZ NOT NULL,
    run_id       INTEGER NOT NULL,
    status       VARCHAR NOT NULL DEFAULT 'open',  -- open | replayed
    replayed_at  TIMESTAMPTZ,
    record_ids   JSON
);

-- Where each source got to. A file drop keeps one key per file content hash; a table or an
-- HTTP collector keeps its position. Moved in the same transaction as the rows it covers.
CREATE TABLE source_cursors (
    collector    VARCHAR NOT NULL,
    key          VARCHAR NOT NULL,
    value        VARCHAR NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (collector, key)
);
