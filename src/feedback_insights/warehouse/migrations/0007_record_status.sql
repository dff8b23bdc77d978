-- The triage status a source keeps for a report (in-session rows: open | triaged | filed |
-- dismissed) and the issue it says the report became, as last read; NULL when the source keeps
-- none. The SQL source reads a row again when its updated_at moves, so these follow the source.
-- Every change seen is kept in record_status_history, with when it was seen.
ALTER TABLE records ADD COLUMN status VARCHAR;
ALTER TABLE records ADD COLUMN issue_url VARCHAR;
UPDATE records SET status = coalesce(json_extract_string(context, '$.status'), 'open'),
                   issue_url = json_extract_string(context, '$.issue_url')
WHERE dialect = 'session';
CREATE TABLE record_status_history (
    collector  VARCHAR NOT NULL,
    id         VARCHAR NOT NULL,
    status     VARCHAR,
    issue_url  VARCHAR,
    seen_at    TIMESTAMPTZ NOT NULL,
    run_id     INTEGER
);
INSERT INTO record_status_history
SELECT collector, id, status, issue_url, ingested_at, run_id FROM records WHERE status IS NOT NULL;
