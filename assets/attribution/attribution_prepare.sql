-- What the month's attribution needs once, before its slices (`attribution_claims.sql`):
-- the claimants and the resources they list, and the bytes each run holds in each bucket
-- snapshot (the macros are `macros.sql`'s). Parameters: $month, $month_end.

-- Sweep controllers (parents of other runs) and finished runs without an end claim no
-- compute or transfer; a RUNNING run is taken to run until the end of the month.
-- (macros.sql `claimant_runs`, which reconciliation reads too).
CREATE OR REPLACE TEMP TABLE attribution_claimants AS
SELECT run_id, hash(run_id) AS run_hash, gpus, resource_ids, region, dataset, rs, re
FROM claimant_runs($month, $month_end);

CREATE OR REPLACE TEMP TABLE attribution_run_resources AS
SELECT DISTINCT k.run_id, k.run_hash, claim_key(listed) AS resource_id, k.rs, k.re, k.gpus
FROM (SELECT *, unnest(resource_ids) AS listed FROM attribution_claimants) k;

-- Rule 4's bytes: per bucket and snapshot, all listed bytes and each known run's
CREATE OR REPLACE TEMP TABLE attribution_snapshot_objects AS
SELECT bucket, snapshot_date, size, prefix, run_id
FROM checkpoint_inventory
WHERE month = $month
  AND (snapshot_date IS NOT NULL OR last_modified < CAST($month_end AS TIMESTAMP));

CREATE OR REPLACE TEMP TABLE attribution_dated_snapshots AS
SELECT DISTINCT bucket, snapshot_date
FROM checkpoint_inventory
WHERE month = $month AND snapshot_date IS NOT NULL;

CREATE OR REPLACE TEMP TABLE attribution_listed_bytes AS
SELECT bucket, snapshot_date, sum(size) AS bytes
FROM attribution_snapshot_objects GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE attribution_run_bytes AS
SELECT bucket, snapshot_date, hash(run_id) AS run_hash, sum(size) AS bytes
FROM attribution_snapshot_objects
WHERE prefix IS NOT NULL
  AND run_id IN (SELECT run_id FROM tracker_runs WHERE month = $month)
GROUP BY ALL
HAVING sum(size) > 0;

DROP TABLE attribution_snapshot_objects;
