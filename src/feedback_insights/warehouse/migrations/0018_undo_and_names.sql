-- Maintainers' corrections are undoable, and a name a maintainer gives a cluster is kept.
-- before:    what an undo needs that the row does not already say (JSON): for a merge, the
--            absorbed cluster's status, name and the clusters that pointed at it; for a move,
--            the clusters it emptied; for a rename, the previous given name.
-- undoes:    on an 'undo' row, the action it took back.
-- undone_by: on the action taken back, the 'undo' row that did it (NULL: still in force).
ALTER TABLE cluster_actions ADD COLUMN before JSON;
ALTER TABLE cluster_actions ADD COLUMN undoes INTEGER;
ALTER TABLE cluster_actions ADD COLUMN undone_by INTEGER;
-- The name a maintainer set in the desk or with `clusters rename` (NULL: the naming rule's or
-- the LLM's). clusters.label shows it; no re-naming or re-clustering replaces it.
ALTER TABLE clusters ADD COLUMN given_name VARCHAR;
