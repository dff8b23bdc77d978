-- Erasure ("forget this record / this account") and deletions at a source reach every table.
-- Drafts remember the records they cite ('collector:id'), so an erasure finds the drafts that
-- quoted one (NULL for drafts made before this: an erasure in their cluster marks them too). A
-- cluster whose members were erased is re-described (label, key terms, medoid) by the next
-- clustering run; a pending draft citing an erased record is redrafted by the next drafting run;
-- a filed issue's body is replaced on GitHub by the next publish run when it is still the body
-- we filed (else it is listed for a maintainer). The audit keeps who, when, why and a hash of
-- each erased id, never the content.
ALTER TABLE drafts ADD COLUMN cited VARCHAR[];
ALTER TABLE drafts ADD COLUMN stale BOOLEAN DEFAULT false;
ALTER TABLE drafts ADD COLUMN filed_body_sha256 VARCHAR;  -- of the body as last sent to GitHub
UPDATE drafts SET filed_body_sha256 = sha256(body) WHERE status = 'filed';
ALTER TABLE clusters ADD COLUMN stale BOOLEAN DEFAULT false;

CREATE SEQUENCE erasure_ids START 1;
CREATE TABLE erasures (
    id          INTEGER PRIMARY KEY DEFAULT nextval('erasure_ids'),
    erased_at   TIMESTAMPTZ NOT NULL,
    actor       VARCHAR NOT NULL,
    reason      VARCHAR,
    id_sha256   VARCHAR[] NOT NULL,   -- sha256 of each 'collector:id' erased
    records     INTEGER NOT NULL,
    quarantined INTEGER NOT NULL,
    clusters    INTEGER NOT NULL,
    drafts      INTEGER NOT NULL
);

-- Write-back's audit: which in-session row was marked filed, with which issue, for which draft,
-- and when (the row's own updated_at moves too, so its next read brings the change back).
CREATE TABLE write_backs (
    draft_id    INTEGER NOT NULL,
    collector   VARCHAR NOT NULL,
    id          VARCHAR NOT NULL,
    status      VARCHAR NOT NULL,
    issue_url   VARCHAR NOT NULL,
    written_at  TIMESTAMPTZ NOT NULL
);
