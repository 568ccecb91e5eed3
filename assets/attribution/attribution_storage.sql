-- Rule 4's bytes, once the month is to be attributed (not when its rows are kept): per
-- bucket and snapshot, all listed bytes and each known run's, for `attribution_affected.sql`
-- and `attribution_claims.sql`. Parameters: $month, $month_end.

CREATE OR REPLACE TEMP TABLE attribution_snapshot_objects AS
SELECT bucket, snapshot_date, size, prefix, run_id
FROM checkpoint_inventory
WHERE month = $month
  AND (snapshot_date IS NOT NULL OR last_modified < CAST($month_end AS TIMESTAMP));

CREATE OR REPLACE TEMP TABLE attribution_dated_snapshots AS
SELECT DISTINCT bucket, snapshot_date FROM dated_snapshots($month);

CREATE OR REPLACE TEMP TABLE attribution_listed_bytes AS
SELECT bucket, snapshot_date, sum(size) AS bytes
FROM attribution_snapshot_objects GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE attribution_run_bytes AS
SELECT bucket, snapshot_date, key_hash(run_id) AS run_hash, sum(size) AS bytes
FROM attribution_snapshot_objects
WHERE prefix IS NOT NULL
  AND run_id IN (SELECT run_id FROM tracker_runs WHERE month = $month)
GROUP BY ALL
HAVING sum(size) > 0;

DROP TABLE attribution_snapshot_objects;
