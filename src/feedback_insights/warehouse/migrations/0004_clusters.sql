-- Embeddings, clusters of duplicate reports, and the maintainers' corrections.

-- One vector per (model, text): a second run embeds only text it has not seen.
CREATE TABLE embeddings (
    model        VARCHAR NOT NULL,
    text_sha256  VARCHAR NOT NULL,
    vector       FLOAT[] NOT NULL,
    PRIMARY KEY (model, text_sha256)
);

CREATE SEQUENCE cluster_ids START 1;

-- Ids are never reused or renumbered. A merged cluster keeps its row and points at the
-- cluster that absorbed it, so drafts and issues that name it still resolve.
CREATE TABLE clusters (
    id           INTEGER PRIMARY KEY DEFAULT nextval('cluster_ids'),
    view         VARCHAR NOT NULL,            -- reports | goals
    service      VARCHAR,
    polarity     VARCHAR NOT NULL,            -- problem | praise
    status       VARCHAR NOT NULL DEFAULT 'open',  -- open | ignored | merged | fixed | wont_fix
    merged_into  INTEGER,
    fixed_at     TIMESTAMPTZ,                 -- when its issue was closed as completed
    label        VARCHAR,
    key_terms    VARCHAR[],
    medoid_collector VARCHAR,
    medoid_id    VARCHAR,
    top_tools    VARCHAR[],
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);

-- Every record the clustering stage has looked at, one row per view. cluster_id NULL means
-- "joined nothing yet": such records are reconsidered by later runs.
CREATE TABLE cluster_members (
    view         VARCHAR NOT NULL,
    collector    VARCHAR NOT NULL,
    id           VARCHAR NOT NULL,
    text_sha256  VARCHAR,                     -- NULL: the record has no words to embed
    cluster_id   INTEGER,
    assigned_by  VARCHAR,                     -- hdbscan | nearest | maintainer
    assigned_at  TIMESTAMPTZ,
    PRIMARY KEY (view, collector, id)
);

CREATE SEQUENCE cluster_action_ids START 1;

-- What maintainers did (merge, split, ignore, unignore), by whom and when.
CREATE TABLE cluster_actions (
    id           INTEGER PRIMARY KEY DEFAULT nextval('cluster_action_ids'),
    action       VARCHAR NOT NULL,
    cluster_id   INTEGER NOT NULL,
    other_id     INTEGER,
    records      JSON,
    reason       VARCHAR,
    actor        VARCHAR NOT NULL,
    acted_at     TIMESTAMPTZ NOT NULL
);
