-- RFC-026 §2.4 signals are an analysis of the comment: a record without one (an RFC-026 thumb
-- with an empty comment, a SEP-2369 item without an observation) has no signals, stored as NULL
-- rather than as a neutral 0.0 / 'medium' that would read as a measurement. Readers (demand,
-- the digest, drafts) treat NULL as "nothing to add". Rows computed by an older version of the
-- heuristics (`source`) are recomputed by the next signals run.
ALTER TABLE record_signals ALTER COLUMN sentiment DROP NOT NULL;
ALTER TABLE record_signals ALTER COLUMN specificity DROP NOT NULL;
ALTER TABLE record_signals ALTER COLUMN topics DROP NOT NULL;
ALTER TABLE record_signals ALTER COLUMN expectation_gap DROP NOT NULL;
ALTER TABLE record_signals ALTER COLUMN severity_language DROP NOT NULL;
