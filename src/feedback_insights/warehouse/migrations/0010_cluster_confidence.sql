-- Each cluster's confidence (from cohesion, separation and size; clusters/_confidence.py) and
-- whether that makes it "needs review": such a cluster is not drafted automatically. And the
-- clustering config version that made it (clusters/_versions.py), so changing defaults never
-- silently regroups: `clusters rebuild` re-clusters with the current version.
ALTER TABLE clusters ADD COLUMN confidence DOUBLE;
ALTER TABLE clusters ADD COLUMN needs_review BOOLEAN DEFAULT false;
ALTER TABLE clusters ADD COLUMN config_version VARCHAR;
-- Clusters made before versions were recorded were made with the first versioned defaults.
UPDATE clusters SET config_version = '1';
