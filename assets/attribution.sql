-- Every billed cost of the month → a run, `untracked` or `unallocated` (SPEC §6).
--
-- A run *claims* a Usage line when it lists the line's resource or the line carries the run
-- tag naming it, and the run's [start, end) overlaps the line's charge period. Its share is
--     min(1, overlap / d) × (min(gpus, G) / G when the run states gpus and G > 0, else 1)
-- where d is how long the resource actually ran in that period (the summed usage hours of
-- all rows of the resource-period, e.g. a savings-plan row + an on-demand row), else the
-- period's length. Shares summing above 1 are scaled down (over-claimed); what is left
-- below 1 is `untracked`. Bucket storage is split by the runs' bytes in the bucket; bucket
-- transfer (cross-region reads) by the overlap of runs that read a dataset of that bucket
-- from another region. Lines that are not usage (tax, credits, purchases, unused
-- commitment) are `unallocated`.
--
-- Resources are matched on a claim key, the same on both sides: a SageMaker training job's
-- ARN (`arn:aws:sagemaker:REGION:ACCOUNT:training-job/NAME`, how the bill names the job)
-- counts as the job's name, lowercased as SageMaker writes it in ARNs, so a run may list
-- the name or the ARN; any other id is matched as it is. One key per side keeps the claim
-- an equi-join.
--
-- Parameters: $month, $month_end, $run_tag. Temp table: config_datasets(name, bucket, region).
WITH
lines AS (
    SELECT
        rowid AS line_key,  -- joins below run on this integer, not the long line id
        x_SourceLine, ResourceId, ChargePeriodStart AS s, ChargePeriodEnd AS e,
        CASE WHEN ResourceId LIKE 'arn:%:sagemaker:%:training-job/%'
             THEN lower(split_part(ResourceId, ':training-job/', 2))
             ELSE ResourceId END AS claim_key,
        coalesce(x_SplitParent, false) AS split_parent,
        EffectiveCost AS c, x_CostComponent AS component, x_AcceleratorCount AS g,
        x_UsageHours AS usage_hours, x_ResourceKind AS resource_kind,
        coalesce(Tags[$run_tag], Tags['user_' || $run_tag], Tags['user:' || $run_tag]) AS tag_run,
        CASE
            WHEN ChargeCategory <> 'Usage' OR CommitmentDiscountStatus = 'Unused' THEN 'non_usage'
            WHEN x_ResourceKind = 'bucket' AND x_CostComponent = 'storage' THEN 'bucket_storage'
            WHEN x_ResourceKind = 'bucket' AND x_CostComponent = 'network' THEN 'bucket_transfer'
            ELSE 'compute'
        END AS rule,
        CASE
            WHEN CommitmentDiscountStatus = 'Unused' THEN 'unused_commitment'
            WHEN ChargeClass = 'Correction' THEN 'correction'
            ELSE lower(ChargeCategory)
        END AS non_usage_kind
    FROM billing_facts
    WHERE month = $month
),
runs AS (
    SELECT * FROM tracker_runs WHERE month = $month
),
-- Sweep controllers (parents of other runs) and finished runs without an end claim no
-- compute or transfer; a RUNNING run is taken to run until the end of the month.
claimants AS (
    SELECT
        run_id, gpus, resource_ids, region, dataset, start_time AS rs,
        CASE WHEN status = 'RUNNING' THEN CAST($month_end AS TIMESTAMP) ELSE end_time END AS re
    FROM runs r
    WHERE (status = 'RUNNING' OR end_time IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM runs child WHERE child.parent_run_id = r.run_id)
),
run_resources AS (
    -- resource_id: the claim key of each listed resource (see the top of this file)
    SELECT DISTINCT
        run_id,
        CASE WHEN listed LIKE 'arn:%:sagemaker:%:training-job/%'
             THEN lower(split_part(listed, ':training-job/', 2))
             ELSE listed END AS resource_id
    FROM (SELECT run_id, unnest(resource_ids) AS listed FROM claimants)
),

-- Rule 1–3: compute and every other Usage line of a resource ---------------------------
compute_lines AS (
    SELECT * FROM lines WHERE rule = 'compute'
),
resource_periods AS (
    -- d: how long the resource ran in the period; a line without a resource is its own
    SELECT
        coalesce(ResourceId, '#' || line_key) AS period_key, s, e,
        CASE WHEN coalesce(sum(usage_hours), 0) > 0 THEN sum(usage_hours)
             ELSE epoch(e - s) / 3600.0 END AS d
    FROM compute_lines
    GROUP BY coalesce(ResourceId, '#' || line_key), s, e
),
span AS (
    SELECT min(s) AS s0, max(e) AS e0 FROM compute_lines
),
run_hours AS (
    -- each clock hour a claimant ran, per resource it lists, within the lines' span: an
    -- equi-join on (resource, hour) keeps the work proportional to run-hours, where a range
    -- join on the resource alone would pair every run with every hour of its instance
    SELECT rr.run_id, rr.resource_id, unnest(generate_series(
        date_trunc('hour', greatest(k.rs, span.s0)),
        date_trunc('hour', least(k.re, span.e0) - INTERVAL 1 MICROSECOND),
        INTERVAL 1 HOUR)) AS hour
    FROM run_resources rr JOIN claimants k USING (run_id) CROSS JOIN span
    WHERE greatest(k.rs, span.s0) < least(k.re, span.e0)
),
compute_claims AS (
    -- lines within one clock hour (hourly exports: nearly all)
    SELECT l.line_key, rh.run_id
    FROM compute_lines l
    JOIN run_hours rh ON rh.resource_id = l.claim_key AND rh.hour = date_trunc('hour', l.s)
    WHERE date_trunc('hour', l.s) = date_trunc('hour', l.e - INTERVAL 1 MICROSECOND)
    UNION
    -- longer lines (daily or monthly charges): few, paired on the resource alone
    SELECT l.line_key, rr.run_id
    FROM compute_lines l JOIN run_resources rr ON rr.resource_id = l.claim_key
    WHERE date_trunc('hour', l.s) <> date_trunc('hour', l.e - INTERVAL 1 MICROSECOND)
    UNION
    -- the run tag on the line
    SELECT l.line_key, l.tag_run AS run_id
    FROM compute_lines l JOIN claimants k ON k.run_id = l.tag_run
),
compute_shares AS (
    SELECT
        l.line_key, k.run_id,
        least(1.0, (epoch(least(l.e, k.re) - greatest(l.s, k.rs)) / 3600.0) / p.d)
          * CASE WHEN k.gpus IS NOT NULL AND l.g > 0
                 THEN least(k.gpus, l.g)::DOUBLE / l.g ELSE 1.0 END AS raw_share
    FROM compute_claims cc
    JOIN compute_lines l USING (line_key)
    JOIN claimants k ON k.run_id = cc.run_id
    JOIN resource_periods p
      ON p.period_key = coalesce(l.ResourceId, '#' || l.line_key) AND p.s = l.s AND p.e = l.e
    WHERE k.rs < l.e AND k.re > l.s AND l.s < l.e
),

-- Rule 4: bucket storage, by tag, else by the runs' share of the bucket's listed bytes -----
storage_lines AS (
    SELECT * FROM lines WHERE rule = 'bucket_storage'
),
storage_tagged AS (
    SELECT l.line_key, l.tag_run AS run_id, 1.0 AS raw_share
    FROM storage_lines l
    WHERE l.tag_run IN (SELECT run_id FROM runs)
),
inventory AS (
    SELECT * FROM checkpoint_inventory WHERE month = $month
),
dated_snapshots AS (
    SELECT DISTINCT bucket, snapshot_date FROM inventory WHERE snapshot_date IS NOT NULL
),
line_snapshots AS (
    -- the snapshot of the line's day when daily snapshots exist, else the month-end one
    -- (the latest dated snapshot, or the undated listing: snapshot_date NULL)
    SELECT
        l.line_key, l.ResourceId AS bucket,
        coalesce(
            (SELECT max(snapshot_date) FROM dated_snapshots d
              WHERE d.bucket = l.ResourceId AND d.snapshot_date = CAST(l.s AS DATE)),
            (SELECT max(snapshot_date) FROM dated_snapshots d WHERE d.bucket = l.ResourceId)
        ) AS snapshot_date
    FROM storage_lines l
    WHERE l.line_key NOT IN (SELECT line_key FROM storage_tagged)
),
snapshot_objects AS (
    SELECT * FROM inventory
    WHERE snapshot_date IS NOT NULL OR last_modified < CAST($month_end AS TIMESTAMP)
),
listed_bytes AS (
    SELECT bucket, snapshot_date, sum(size) AS bytes
    FROM snapshot_objects GROUP BY ALL
),
run_bytes AS (
    SELECT bucket, snapshot_date, run_id, sum(size) AS bytes
    FROM snapshot_objects
    WHERE prefix IS NOT NULL AND run_id IN (SELECT run_id FROM runs)
    GROUP BY ALL
    HAVING sum(size) > 0
),
storage_split AS (
    SELECT ls.line_key, rb.run_id, rb.bytes / lb.bytes AS raw_share
    FROM line_snapshots ls
    JOIN listed_bytes lb
      ON lb.bucket = ls.bucket AND lb.snapshot_date IS NOT DISTINCT FROM ls.snapshot_date
    JOIN run_bytes rb
      ON rb.bucket = ls.bucket AND rb.snapshot_date IS NOT DISTINCT FROM ls.snapshot_date
    WHERE lb.bytes > 0
),

-- Rule 5: cross-region reads billed on a dataset's bucket --------------------------------
transfer_overlaps AS (
    SELECT l.line_key, k.run_id,
           epoch(least(l.e, k.re) - greatest(l.s, k.rs)) / 3600.0 AS overlap_hours
    FROM lines l
    JOIN config_datasets ds ON ds.bucket = l.ResourceId
    JOIN claimants k ON k.dataset = ds.name AND k.region IS NOT NULL AND k.region <> ds.region
    WHERE l.rule = 'bucket_transfer' AND k.rs < l.e AND k.re > l.s AND l.s < l.e
),
transfer_shares AS (
    SELECT line_key, run_id,
           overlap_hours / sum(overlap_hours) OVER (PARTITION BY line_key) AS raw_share
    FROM transfer_overlaps
),

-- Shares → rows -------------------------------------------------------------------------
claims AS (
    SELECT * FROM compute_shares
    UNION ALL SELECT * FROM storage_tagged
    UNION ALL SELECT * FROM storage_split
    UNION ALL SELECT * FROM transfer_shares
),
claimed AS (
    SELECT line_key, sum(raw_share) AS claimed_share FROM claims GROUP BY line_key
),
run_rows AS (
    SELECT
        l.*, cl.run_id, t.claimed_share,
        CASE WHEN t.claimed_share > 1 + 1e-12 THEN cl.raw_share / t.claimed_share
             ELSE cl.raw_share END AS share,
        CAST(NULL AS VARCHAR) AS kind
    FROM claims cl
    JOIN claimed t USING (line_key)
    JOIN lines l USING (line_key)
),
untracked_rows AS (
    SELECT
        l.*, CAST(NULL AS VARCHAR) AS run_id, coalesce(t.claimed_share, 0) AS claimed_share,
        1 - coalesce(t.claimed_share, 0) AS share,
        CASE
            -- an instance whose pods took their split cost: what is left is its unused
            -- capacity, claimed by a run listing the instance or not
            WHEN coalesce(t.claimed_share, 0) > 0 OR l.split_parent THEN 'idle_capacity'
            WHEN l.ResourceId IS NULL OR l.resource_kind = 'shared' THEN 'shared'
            ELSE 'no_run'
        END AS kind
    FROM lines l
    LEFT JOIN claimed t USING (line_key)
    WHERE l.rule <> 'non_usage' AND 1 - coalesce(t.claimed_share, 0) > 1e-12
),
unallocated_rows AS (
    SELECT l.*, CAST(NULL AS VARCHAR) AS run_id, CAST(NULL AS DOUBLE) AS claimed_share,
           1.0 AS share, l.non_usage_kind AS kind
    FROM lines l
    WHERE l.rule = 'non_usage'
),
all_rows AS (
    SELECT * FROM run_rows
    UNION ALL BY NAME SELECT * FROM untracked_rows
    UNION ALL BY NAME SELECT * FROM unallocated_rows
)
SELECT
    CAST($month AS DATE) AS month,
    a.x_SourceLine,
    a.run_id,
    CASE
        WHEN a.rule = 'non_usage' THEN 'unallocated'
        WHEN a.run_id IS NULL THEN 'untracked'
        WHEN r.purpose = 'search' OR r.search_id IS NOT NULL THEN 'search'
        WHEN r.purpose = 'production' THEN 'production'
        WHEN r.purpose = 'preprocess' THEN 'preprocessing'
        ELSE 'other'
    END AS purpose_class,
    a.component,
    a.c * a.share AS cost,
    a.share * a.usage_hours AS hours,
    a.share * a.usage_hours * a.g AS accelerator_hours,
    a.share,
    a.claimed_share,
    a.rule,
    a.kind
FROM all_rows a
LEFT JOIN runs r ON r.run_id = a.run_id
