-- What scrubbing removed from each record, by type ({"email": 2, "openai_key": 1}); NULL
-- for records stored before scrubbing existed. The digest reports the totals.
ALTER TABLE records ADD COLUMN redactions JSON;
