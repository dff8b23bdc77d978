-- The erasure ledger: what was erased, as keyed HMACs (never the values), so that no source
-- stores an erased report again. A file drop keeps the line, an SQL table keeps its row until
-- its owner deletes it, a collector may send it again: every store step looks here first.
-- Three kinds of mark, each an HMAC (the pseudonymisation key) over its own domain:
--   id          collector + record id
--   content     collector + account + content hash (the same text from another account is
--               someone else's report, and is stored)
--   quarantine  a quarantine entry's id
-- It supersedes the unkeyed sha256 of each erased id that `erasures` kept: a short id's plain
-- hash can be reversed by trying every id.
CREATE TABLE erasure_ledger (
    mark       VARCHAR PRIMARY KEY,
    kind       VARCHAR NOT NULL,
    erasure_id INTEGER NOT NULL,
    erased_at  TIMESTAMPTZ NOT NULL
);
ALTER TABLE erasures DROP COLUMN id_sha256;
-- Reports a run did not store because they were erased before.
ALTER TABLE ingest_runs ADD COLUMN erased INTEGER DEFAULT 0;
