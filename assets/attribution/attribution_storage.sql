-- Rule 4's bytes, once the month is to be attributed (not when its rows are kept): per
-- bucket and snapshot, all listed bytes and each known run's, for `attribution_affected.sql`
-- and `attribution_claims.sql`. Parameters: $month, $month_start, $month_end.

CREATE OR REPLACE TEMP TABLE attribution_dated_snapshots AS
SELECT DISTINCT bucket, snapshot_date FROM dated_snapshots($month);

-- the listed objects (`added` false), and for a bucket that dated reports and an undated
-- listing both list, on each of its dated days, the undated objects no dated configuration
-- covers (macros.sql `undated_uncovered`) written by that day's end (`added` true). Those
-- are summed by the day they were written (every one written before the month as one day)
-- before they meet the days: a day × object product of a large undated listing is not made
CREATE OR REPLACE TEMP TABLE attribution_snapshot_objects AS
SELECT bucket, snapshot_date, size, prefix, run_id, false AS added
FROM checkpoint_inventory
WHERE month = $month
  AND (snapshot_date IS NOT NULL OR last_modified < CAST($month_end AS TIMESTAMP))
UNION ALL
SELECT u.bucket, d.snapshot_date, u.size, u.prefix, u.run_id, true
FROM (SELECT bucket, prefix, run_id, sum(size) AS size,
             greatest(CAST(last_modified AS DATE),
                      CAST($month_start AS DATE) - 1) AS written
      FROM undated_uncovered($month)
      WHERE last_modified < CAST($month_end AS TIMESTAMP)
      GROUP BY ALL) AS u
JOIN attribution_dated_snapshots AS d ON d.bucket = u.bucket AND u.written <= d.snapshot_date;

CREATE OR REPLACE TEMP TABLE attribution_listed_bytes AS
SELECT bucket, snapshot_date, added, sum(size) AS bytes
FROM attribution_snapshot_objects GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE attribution_run_bytes AS
SELECT bucket, snapshot_date, added, key_hash(run_id) AS run_hash, sum(size) AS bytes
FROM attribution_snapshot_objects
WHERE prefix IS NOT NULL
  AND run_id IN (SELECT run_id FROM tracker_runs WHERE month = $month)
GROUP BY ALL
HAVING sum(size) > 0;

DROP TABLE attribution_snapshot_objects;
