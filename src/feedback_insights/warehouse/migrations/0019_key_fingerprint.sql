-- Which key the warehouse's pseudonyms (and its erasure ledger's marks) were made with, as a
-- keyed fingerprint that does not reveal the key: HMAC-SHA256 of a fixed label under it. A
-- process pseudonymising with another key would count the same customers twice and no longer
-- recognise what was erased; it is refused instead. One row, written by the first process that
-- pseudonymises into the warehouse (a warehouse from before this migration: the first run after
-- it).
CREATE TABLE key_fingerprint (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    fingerprint VARCHAR NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL
);
