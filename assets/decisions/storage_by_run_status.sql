-- Checkpoint storage by the state of the run that wrote it, at the month's end.
--
--   live       - the run is still RUNNING (its checkpoints are needed to resume)
--   production - a FINISHED production run, or one explicitly marked keep=true
--   dead       - every other run the tracker knows: FAILED, KILLED, deleted in the tracker,
--                or a FINISHED experiment nobody asked to keep
--   orphan     - a run folder whose run the tracker does not know at all
-- Dead and orphan bytes are the storage that a retention policy would free. Only objects in
-- run folders under a checkpoint prefix count; datasets and other data are not checkpoints.
-- Cost is each bucket's storage bill this month spread evenly over every byte listed in it.
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
    SELECT run_id, status, purpose, keep, deleted
    FROM tracker_runs
    WHERE month = $month
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY source NULLS LAST, start_time) = 1
),
classified AS (
    SELECT
        o.bucket,
        o.size,
        CASE
            WHEN r.run_id IS NULL THEN 'orphan'
            WHEN r.status = 'RUNNING' AND NOT r.deleted THEN 'live'
            WHEN r.status = 'FINISHED' AND NOT r.deleted
                 AND (r.purpose = 'production' OR r.keep) THEN 'production'
            ELSE 'dead'
        END AS run_status
    FROM snapshot AS o
    LEFT JOIN runs AS r ON r.run_id = o.run_id
    WHERE o.prefix IS NOT NULL
      AND o.run_id IS NOT NULL
)
SELECT
    CAST($month AS DATE)                            AS month,
    c.run_status,
    count(*)                                        AS objects,
    sum(c.size)                                     AS bytes,
    sum(c.size * coalesce(p.cost_per_byte, 0))      AS cost
FROM classified AS c
LEFT JOIN price AS p ON p.bucket = c.bucket
GROUP BY c.run_status
