-- LLM-assisted clustering (clusters/_assist.py; optional, `[llm] clustering = [...]`).

-- A one-sentence, abstract problem statement per report text, embedded with the text. Keyed by
-- what made it, so a new model or prompt asks again and an unchanged text never does.
-- embedded_sha256 is the hash of the text that was embedded (statement + report text: the key
-- of its vector in `embeddings`, and of the member in `cluster_members`), so an erasure that
-- drops that vector can drop the statement with it.
CREATE TABLE problem_statements (
    model           VARCHAR NOT NULL,
    prompt_version  VARCHAR NOT NULL,
    text_sha256     VARCHAR NOT NULL,     -- of the report's text, as the view composes it
    statement       VARCHAR NOT NULL,
    embedded_sha256 VARCHAR NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (model, prompt_version, text_sha256)
);

-- The name an LLM gave a cluster ("tool or endpoint: symptom"), and from what: the evidence
-- the prompt showed, by hash. A cluster's label came from the LLM when it equals this name.
CREATE TABLE cluster_names (
    cluster_id      INTEGER PRIMARY KEY,
    name            VARCHAR NOT NULL,
    model           VARCHAR NOT NULL,
    prompt_version  VARCHAR NOT NULL,
    evidence_sha256 VARCHAR NOT NULL,
    named_at        TIMESTAMPTZ NOT NULL
);

-- Every borderline pair put to the model and its answer, so a pair is asked once per evidence;
-- for a yes, the absorbed cluster's members (JSON 'collector:id' list): what
-- `clusters split SURVIVOR …` takes back out to undo the merge.
CREATE TABLE cluster_judgements (
    model           VARCHAR NOT NULL,
    prompt_version  VARCHAR NOT NULL,
    evidence_sha256 VARCHAR NOT NULL,
    cluster_id      INTEGER NOT NULL,
    other_id        INTEGER NOT NULL,
    similarity      DOUBLE NOT NULL,
    same            BOOLEAN NOT NULL,
    reason          VARCHAR NOT NULL,
    records         JSON,
    judged_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (model, prompt_version, evidence_sha256)
);

-- Every call clustering made, by hash only, as `llm_calls` keeps drafting's: what it was for
-- (statement | name | judge), the clusters it was about (none for a statement), how it ended.
CREATE TABLE cluster_llm_calls (
    purpose         VARCHAR NOT NULL,
    cluster_id      INTEGER,
    other_id        INTEGER,
    model           VARCHAR NOT NULL,
    prompt_version  VARCHAR NOT NULL,
    prompt_sha256   VARCHAR NOT NULL,
    response_sha256 VARCHAR,
    outcome         VARCHAR NOT NULL,     -- ok | invalid | error
    error           VARCHAR,
    seconds         DOUBLE NOT NULL,
    called_at       TIMESTAMPTZ NOT NULL
);
