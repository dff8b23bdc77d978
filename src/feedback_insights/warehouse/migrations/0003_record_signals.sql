-- RFC-026 §2.4 signals computed from each record's scrubbed text, one row per record. A
-- collector's own nlp object stays under records.metadata.nlp; `source` names who computed these.
CREATE TABLE record_signals (
    collector          VARCHAR NOT NULL,
    id                 VARCHAR NOT NULL,
    sentiment          DOUBLE NOT NULL,      -- -1.0 frustrated … 1.0 positive
    specificity        DOUBLE NOT NULL,      -- 0.0 vague … 1.0 precise technical detail
    topics             VARCHAR[] NOT NULL,
    expectation_gap    BOOLEAN NOT NULL,
    severity_language  VARCHAR NOT NULL,     -- low | medium | high
    source             VARCHAR NOT NULL,
    computed_at        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (collector, id)
);
