-- Where each week's digest went: one row per channel (webhook, email) that took it, with the
-- sha256 of what it was sent. A retry, or the same command run again, skips a channel that
-- already has the same week's same content, so a channel that worked is not posted to twice
-- because another failed; `digest --resend` sends it again (sent_at then says when). source is
-- '' for everyone's digest (the one that is sent), else its --source.
CREATE TABLE digest_sends (
    week VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    channel VARCHAR NOT NULL,
    content_sha256 VARCHAR NOT NULL,
    sent_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (week, source, channel, content_sha256)
);
