-- Where each week's digest went, now per recipient: an email the relay took for some of its
-- recipients and refused for others is recorded for those it took, so that a retry (or the
-- command run again) mails the refused ones alone. recipient is the envelope address for the
-- email, '' for the webhook. Rows from before name no recipient (''): they are kept as the
-- record they are, and an email whose recipients were not recorded is sent to them again.
CREATE TABLE digest_sends_by_recipient (
    week VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    channel VARCHAR NOT NULL,
    content_sha256 VARCHAR NOT NULL,
    recipient VARCHAR NOT NULL,
    sent_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (week, source, channel, content_sha256, recipient)
);
INSERT INTO digest_sends_by_recipient
    SELECT week, source, channel, content_sha256, '', sent_at FROM digest_sends;
DROP TABLE digest_sends;
ALTER TABLE digest_sends_by_recipient RENAME TO digest_sends;
