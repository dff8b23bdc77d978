-- Owner-private sources: a report of a private source is never quoted in what leaves the
-- warehouse and the desk, unless a maintainer quotes it into its cluster's draft explicitly,
-- with who and why. One row per (cluster, report); the draft it was quoted into is kept for the
-- record. Record-keyed: erasure deletes the rows of the records it erases.
CREATE TABLE draft_quotes (
    cluster_id  INTEGER NOT NULL,
    collector   VARCHAR NOT NULL,
    id          VARCHAR NOT NULL,
    draft_id    INTEGER NOT NULL,
    actor       VARCHAR NOT NULL,
    reason      VARCHAR NOT NULL,
    quoted_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (cluster_id, collector, id)
);
