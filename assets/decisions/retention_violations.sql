-- Retention violations: checkpoint objects the retention policy says should be gone, each
-- priced at what it costs to keep for a month.
--
-- Policy (SPEC section 7):
--   * a RUNNING run keeps its newest $keep_last_live checkpoints (to resume from);
--   * a FINISHED run that is production, or explicitly marked keep=true, keeps its newest
--     $keep_last_production checkpoints;
--   * every other run the tracker knows is dead (FAILED, KILLED, deleted in the tracker, or
--     a FINISHED experiment nobody asked to keep): it keeps none;
--   * an orphan (a run folder whose run the tracker does not know) keeps none;
--   * nothing is a violation until it is older than $grace_days days at the month's end, so
--     a checkpoint written on the 30th is not flagged on the 31st.
-- The buckets are read as they stood at the month's end (the inventory snapshot).
WITH inv AS (
    SELECT * FROM checkpoint_inventory WHERE month = $month
),
latest_dated AS (
    -- buckets with daily inventories: their last snapshot of the month is the month-end state
    SELECT bucket, max(snapshot_date) AS snapshot_date
    FROM inv
    WHERE snapshot_date IS NOT NULL
    GROUP BY bucket
),
snapshot AS (
    -- otherwise the bucket has one undated listing: keep what existed before the month ended
    SELECT i.*
    FROM inv AS i
    LEFT JOIN latest_dated AS d ON d.bucket = i.bucket
    WHERE (d.snapshot_date IS NOT NULL AND i.snapshot_date = d.snapshot_date)
       OR (d.snapshot_date IS NULL AND i.snapshot_date IS NULL
           AND i.last_modified < $month_end)
),
price AS (
    -- the bucket's storage bill this month spread evenly over every byte listed in it
    -- (checkpoints, datasets, everything): cost per byte-month
    SELECT
        l.bucket,
        CASE WHEN l.listed_bytes > 0
             THEN coalesce(c.storage_cost, 0) / l.listed_bytes
             ELSE 0 END AS cost_per_byte
    FROM (SELECT bucket, sum(size) AS listed_bytes FROM snapshot GROUP BY bucket) AS l
    LEFT JOIN (SELECT ResourceId AS bucket, sum(EffectiveCost) AS storage_cost
               FROM billing_facts
               WHERE month = $month AND x_CostComponent = 'storage'
               GROUP BY ResourceId) AS c
      ON c.bucket = l.bucket
),
runs AS (
    -- the tracker snapshot; one row per run id
    SELECT run_id, status, purpose, keep, deleted
    FROM tracker_runs
    WHERE month = $month
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY source NULLS LAST, start_time) = 1
),
objects AS (
    -- only objects inside a run folder under a checkpoint prefix are governed by the policy;
    -- datasets and other data in the same bucket are not checkpoints
    SELECT
        o.bucket, o.key, o.size, o.last_modified, o.run_id, o.checkpoint,
        coalesce(o.checkpoint, o.key) AS checkpoint_name,
        r.status, r.purpose,
        CASE
            WHEN r.run_id IS NULL THEN 'orphan'
            WHEN r.status = 'RUNNING' AND NOT r.deleted THEN 'live'
            WHEN r.status = 'FINISHED' AND NOT r.deleted
                 AND (r.purpose = 'production' OR r.keep) THEN 'production'
            ELSE 'dead'
        END AS run_class
    FROM snapshot AS o
    LEFT JOIN runs AS r ON r.run_id = o.run_id
    WHERE o.prefix IS NOT NULL
      AND o.run_id IS NOT NULL
),
checkpoints AS (
    -- a checkpoint is as new as its newest shard
    SELECT bucket, run_id, checkpoint_name, max(last_modified) AS newest
    FROM objects
    GROUP BY bucket, run_id, checkpoint_name
),
ranked AS (
    -- 1 = the run's newest checkpoint; equal times are broken by name, the higher name
    -- (e.g. step-000300 over step-000200) counting as the newer one
    SELECT
        bucket, run_id, checkpoint_name,
        row_number() OVER (PARTITION BY bucket, run_id
                           ORDER BY newest DESC NULLS LAST, checkpoint_name DESC) AS recency
    FROM checkpoints
),
judged AS (
    SELECT
        o.*,
        CASE
            WHEN o.run_class = 'orphan' THEN 'orphan'
            WHEN o.run_class = 'dead' THEN 'dead_run'
            WHEN o.run_class = 'live' AND k.recency > $keep_last_live THEN 'beyond_keep_last'
            WHEN o.run_class = 'production' AND k.recency > $keep_last_production
                THEN 'beyond_keep_last'
        END AS reason
    FROM objects AS o
    JOIN ranked AS k
      ON k.bucket = o.bucket AND k.run_id = o.run_id AND k.checkpoint_name = o.checkpoint_name
)
SELECT
    CAST($month AS DATE)                    AS month,
    j.bucket,
    j.key,
    j.run_id,
    j.status                                AS run_status,
    j.purpose,
    j.checkpoint,
    j.reason,
    j.size                                  AS bytes,
    j.last_modified,
    j.size * coalesce(p.cost_per_byte, 0)   AS monthly_cost
FROM judged AS j
LEFT JOIN price AS p ON p.bucket = j.bucket
WHERE j.reason IS NOT NULL
  -- the grace period: strictly older than grace_days at the month's end
  AND j.last_modified < CAST($month_end AS TIMESTAMP) - INTERVAL ($grace_days) DAY
