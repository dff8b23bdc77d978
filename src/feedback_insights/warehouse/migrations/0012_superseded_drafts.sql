-- Maintainers' corrections reach the drafts. A draft whose cluster was merged away (or emptied
-- by a move) is never filed alongside the survivor's: one not filed yet gets status
-- 'superseded'; superseded_by names the survivor's draft when there is one. A filed one keeps
-- its issue (status 'filed', so its body still follows erasures) and, when the survivor's issue
-- is filed too, the next publish closes it on GitHub as a duplicate of the survivor's:
-- duplicate_marked_at says when (NULL: still to do, retried by every publish until done).
ALTER TABLE drafts ADD COLUMN superseded_by INTEGER;
ALTER TABLE drafts ADD COLUMN duplicate_marked_at TIMESTAMPTZ;
