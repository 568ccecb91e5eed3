-- The claims of one slice of the month (SPEC §6): the lines whose charge period starts in
-- [$slice_start, $slice_end), as temp tables for `attribution.sql` to turn into rows:
--   attribution_claims (line_key, run_hash, raw_share): each run's share of a line before
--                       over-claimed lines are scaled down, the run named by key_hash(run_id)
--                       as attribution_rows names it (computed once per run in
--                       attribution_prepare.sql);
--   attribution_claimed (line_key, claimed_share): S, the sum of a line's shares.
-- A line is keyed by its `rowid` in billing_facts (the month's rows do not move while the
-- statements run), so the claims carry integers, not the long x_SourceLine.
--
-- A run *claims* a Usage line when it lists the line's resource or the line carries the run
-- tag naming it, and the run's [start, end) overlaps the line's charge period. Its share is
--     min(1, overlap / d) × (min(gpus, G) / G when the run states gpus and G > 0, else 1)
-- where d is how long the resource actually ran in that period (the summed usage hours of
-- all rows of the resource-period, e.g. a savings-plan row + an on-demand row), else the
-- period's length. Bucket storage is split by the runs' bytes in the bucket; bucket
-- transfer (cross-region reads) by the overlap of runs that read a dataset of that bucket
-- from another region (regions compared whatever their case and surrounding blanks:
-- macros.sql `region_key`).
--
-- Resources are matched on `claim_key` (macros.sql: a SageMaker training job's ARN counts as
-- the job's name, so a run may list either; an Azure id in lower case; any other id is
-- matched as it is). One key per side keeps the claim an equi-join. A dataset's bucket is
-- matched with a transfer line's resource alike (an Azure storage account's id in any case).
--
-- Each statement is small on purpose: one join at a time keeps DuckDB's memory to one hash
-- table, where a single statement held several at once and spilled gigabytes; and a large
-- month goes by slices of its lines (a line's claims, and the lines sharing its resource and
-- period, all fall in the line's slice), so each hash table holds a slice, not the month.
-- Only the lines `in_attribution_scope` (macros.sql) are read: all of them, or those a re-run
-- attributes again (attribution_affected.sql).
-- Parameters: $month, $month_start, $month_end, $run_tag, $slice_start, $slice_end. Temp
-- tables: config_datasets(name, bucket, region) and those of `attribution_prepare.sql`; the
-- macros of `macros.sql`.

-- Rule 1–3: compute and every other Usage line of a resource, read from the bill straight
-- into the table the claims join (one pass: staging all usage lines first and filtering them
-- again cost 1.0–1.4 s more at 5M lines) ----------------------------------------------------
CREATE OR REPLACE TEMP TABLE attribution_compute_lines AS
WITH usage_lines AS (
    SELECT
        rowid AS line_key,
        ResourceId, ChargePeriodStart AS s, ChargePeriodEnd AS e,
        claim_key(ResourceId) AS claim_key,
        x_AcceleratorCount AS g, x_UsageHours AS usage_hours,
        user_tag(Tags, $run_tag) AS tag_run
    FROM billing_facts
    WHERE month = $month
      AND ChargePeriodStart >= $slice_start AND ChargePeriodStart < $slice_end
      AND attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind,
                           x_CostComponent) = 'compute'
      AND in_attribution_scope(rowid)
)
SELECT
    line_key, claim_key, s, e, g, tag_run,
    date_trunc('hour', s) AS hour,
    -- lines within one clock hour of the month (hourly exports: nearly all) are paired with
    -- runs on (resource, hour); longer ones (daily or monthly charges) and any outside the
    -- month on the resource alone
    date_trunc('hour', s) = date_trunc('hour', e - INTERVAL 1 MICROSECOND)
        AND s >= CAST($month_start AS TIMESTAMP) AND e <= CAST($month_end AS TIMESTAMP)
        AS in_hour,
    -- d: how long the resource ran in the period; a line without a resource is its own.
    -- The resource is its claim key, as runs name it: an Azure id's rows spelled in two
    -- cases (a reservation-covered row `…/ML-RG/…`, an on-demand one lowercased) are one VM
    CASE WHEN coalesce(fsum(usage_hours) OVER period, 0) > 0 THEN fsum(usage_hours) OVER period
         ELSE epoch(e - s) / 3600.0 END AS d
FROM usage_lines
WINDOW period AS (PARTITION BY coalesce(claim_key, '#' || line_key), s, e);

CREATE OR REPLACE TEMP TABLE attribution_claims AS
WITH
span AS (
    -- the hours the hourly lines cover: inside the month by their definition, so a run
    -- "ending" in 9999 or a line ending in 9999 expands to at most the month's hours
    SELECT min(s) AS s0, max(e) AS e0 FROM attribution_compute_lines WHERE in_hour
),
run_hours AS (
    -- each clock hour a claimant ran, per resource it lists, within the hourly lines' span:
    -- an equi-join on (resource, hour) keeps the work proportional to run-hours, where a
    -- range join on the resource alone would pair every run with every hour of its instance
    SELECT rr.*, unnest(generate_series(
        date_trunc('hour', greatest(rr.rs, span.s0)),
        date_trunc('hour', least(rr.re, span.e0) - INTERVAL 1 MICROSECOND),
        INTERVAL 1 HOUR)) AS hour
    FROM attribution_run_resources rr CROSS JOIN span
    WHERE greatest(rr.rs, span.s0) < least(rr.re, span.e0)
)
SELECT l.line_key, h.run_hash, compute_share(l.s, l.e, l.g, l.d, h.rs, h.re, h.gpus) AS raw_share
FROM attribution_compute_lines l
JOIN run_hours h ON h.resource_id = l.claim_key AND h.hour = l.hour
WHERE l.in_hour AND h.rs < l.e AND h.re > l.s AND l.s < l.e
UNION ALL
SELECT l.line_key, rr.run_hash, compute_share(l.s, l.e, l.g, l.d, rr.rs, rr.re, rr.gpus)
FROM attribution_compute_lines l
JOIN attribution_run_resources rr ON rr.resource_id = l.claim_key
WHERE NOT l.in_hour AND rr.rs < l.e AND rr.re > l.s AND l.s < l.e
UNION ALL
-- the run tag on the line, unless the run lists the resource too (counted above)
SELECT l.line_key, k.run_hash, compute_share(l.s, l.e, l.g, l.d, k.rs, k.re, k.gpus)
FROM attribution_compute_lines l
JOIN attribution_claimants k ON k.run_id = l.tag_run
WHERE k.rs < l.e AND k.re > l.s AND l.s < l.e
  AND NOT EXISTS (SELECT 1 FROM attribution_run_resources rr
                  WHERE rr.run_id = k.run_id AND rr.resource_id = l.claim_key);

-- the usage lines of buckets (rules 4 and 5), with only what their claims need
CREATE OR REPLACE TEMP TABLE attribution_lines AS
SELECT
    rowid AS line_key,
    ResourceId, ChargePeriodStart AS s, ChargePeriodEnd AS e,
    user_tag(Tags, $run_tag) AS tag_run,
    attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind, x_CostComponent)
        AS rule
FROM billing_facts
WHERE month = $month
  AND ChargePeriodStart >= $slice_start AND ChargePeriodStart < $slice_end
  AND attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind,
                       x_CostComponent) IN ('bucket_storage', 'bucket_transfer')
  AND in_attribution_scope(rowid);

-- Rule 4: bucket storage, by tag, else by the runs' share of the bucket's listed bytes -----
INSERT INTO attribution_claims
WITH
storage_lines AS (
    SELECT * FROM attribution_lines WHERE rule = 'bucket_storage'
),
storage_tagged AS (
    SELECT l.line_key, key_hash(l.tag_run) AS run_hash, 1.0 AS raw_share
    FROM storage_lines l
    WHERE l.tag_run IN (SELECT run_id FROM tracker_runs WHERE month = $month)
),
line_snapshots AS (
    -- the snapshot of the line's day when daily snapshots exist, else the month-end one
    -- (the latest dated snapshot, or the undated listing: snapshot_date NULL). A bucket an
    -- undated listing lists too holds on a dated day its undated objects no dated
    -- configuration covers as well (`listed_bytes`)
    SELECT
        l.line_key, l.ResourceId AS bucket,
        coalesce(
            (SELECT max(snapshot_date) FROM attribution_dated_snapshots d
              WHERE d.bucket = l.ResourceId AND d.snapshot_date = CAST(l.s AS DATE)),
            (SELECT max(snapshot_date) FROM attribution_dated_snapshots d
              WHERE d.bucket = l.ResourceId)
        ) AS snapshot_date
    FROM storage_lines l
    WHERE l.line_key NOT IN (SELECT line_key FROM storage_tagged)
),
day_objects AS (
    -- a bucket of several configurations on a line's day: macros.sql `configured_snapshot`;
    -- a bucket of one is that day's report(s), as attribution_storage.sql sums them
    SELECT bucket, day AS snapshot_date, size, prefix, run_id
    FROM configured_snapshot($month, (
        SELECT list(DISTINCT {'bucket': bucket, 'snapshot_date': snapshot_date})
        FROM line_snapshots))
),
configured AS (
    SELECT bucket FROM configured_reports($month)
),
listed_bytes AS (
    -- a bucket's dated and undated objects of the day (attribution_storage.sql `added`: the
    -- undated objects no dated configuration covers, in a bucket dated reports list too)
    SELECT bucket, snapshot_date, sum(bytes) AS bytes
    FROM (SELECT bucket, snapshot_date, bytes FROM attribution_listed_bytes
          WHERE added OR bucket NOT IN (SELECT bucket FROM configured)
          UNION ALL
          SELECT bucket, snapshot_date, sum(size) FROM day_objects GROUP BY ALL)
    GROUP BY ALL
),
run_bytes AS (
    SELECT bucket, snapshot_date, run_hash, sum(bytes) AS bytes
    FROM (SELECT bucket, snapshot_date, run_hash, bytes FROM attribution_run_bytes
          WHERE added OR bucket NOT IN (SELECT bucket FROM configured)
          UNION ALL
          SELECT bucket, snapshot_date, key_hash(run_id), sum(size) FROM day_objects
          WHERE prefix IS NOT NULL
            AND run_id IN (SELECT run_id FROM tracker_runs WHERE month = $month)
          GROUP BY ALL)
    GROUP BY ALL
    HAVING sum(bytes) > 0
)
SELECT line_key, run_hash, raw_share FROM storage_tagged
UNION ALL
SELECT ls.line_key, rb.run_hash, rb.bytes / lb.bytes AS raw_share
FROM line_snapshots ls
JOIN listed_bytes lb
  ON lb.bucket = ls.bucket AND lb.snapshot_date IS NOT DISTINCT FROM ls.snapshot_date
JOIN run_bytes rb
  ON rb.bucket = ls.bucket AND rb.snapshot_date IS NOT DISTINCT FROM ls.snapshot_date
WHERE lb.bytes > 0;

-- Rule 5: cross-region reads billed on a dataset's bucket --------------------------------
INSERT INTO attribution_claims
WITH transfer_overlaps AS (
    SELECT l.line_key, k.run_hash,
           epoch(least(l.e, k.re) - greatest(l.s, k.rs)) / 3600.0 AS overlap_hours
    FROM attribution_lines l
    JOIN config_datasets ds ON claim_key(ds.bucket) = claim_key(l.ResourceId)
    JOIN attribution_claimants k
      ON k.dataset = ds.name AND k.region IS NOT NULL
     AND region_key(k.region) <> region_key(ds.region)
    WHERE l.rule = 'bucket_transfer' AND k.rs < l.e AND k.re > l.s AND l.s < l.e
)
SELECT line_key, run_hash,
       overlap_hours / fsum(overlap_hours) OVER (PARTITION BY line_key) AS raw_share
FROM transfer_overlaps;

CREATE OR REPLACE TEMP TABLE attribution_claimed AS
SELECT line_key, fsum(raw_share) AS claimed_share FROM attribution_claims GROUP BY line_key;
