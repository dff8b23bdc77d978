-- One quarantine entry per received report: ids now include where it came from
-- (q_ + sha256(collector, source_uri, position, raw), 16 hex digits), and each entry keeps how
-- many identical reports came before it in the same delivery, so that a replay restores the
-- same records ingest would have stored. An entry at position 'file' stands for a whole file
-- that could not be read; replaying it reads the file again. Runs killed before they finished
-- are marked 'aborted' by the next one (ingest_runs.status: running | ok | failed | aborted).
ALTER TABLE quarantine ADD COLUMN occurrence INTEGER DEFAULT 0;
