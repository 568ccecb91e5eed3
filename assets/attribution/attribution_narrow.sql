-- An incremental re-run (attribution.py), once it is decided: the claims of the affected lines
-- (`attribution_affected.sql`) need only the run resources those lines are of, so the others
-- are dropped and the runs' hours are expanded for the affected resources alone.
-- Parameters: $month.
DELETE FROM attribution_run_resources
WHERE resource_id NOT IN (
    SELECT DISTINCT claim_key(ResourceId)
    FROM billing_facts
    WHERE month = $month AND ResourceId IS NOT NULL
      AND rowid IN (SELECT line_rowid FROM attribution_affected));
