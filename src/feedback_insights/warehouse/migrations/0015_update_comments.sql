-- The demand-update comments publishing posted on filed issues: the report each one quotes (the
-- cluster's newest, which the issue body may not cite), so that erasing that report reaches the
-- comment too, and the SHA-256 of the comment as posted, so that one someone edited on GitHub
-- since is left for a person to check rather than overwritten. A comment whose report is no
-- longer in `records` (or whose quoted_id was cleared by an erasure) is rewritten by the next
-- publish, or by `forget` with GitHub at hand, and its row goes.
CREATE TABLE update_comments (
    draft_id INTEGER NOT NULL,
    comment_id BIGINT NOT NULL,
    quoted_collector VARCHAR,
    quoted_id VARCHAR,
    body_sha256 VARCHAR NOT NULL,
    posted_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (draft_id, comment_id)
);
