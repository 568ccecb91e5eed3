-- Retention violations: checkpoint objects the retention policy says should be gone, each
-- priced at what it costs to keep for a month.
--
-- Policy (SPEC section 7):
--   * a RUNNING run keeps its newest $keep_last_live checkpoints (to resume from); a run is
--     judged by its status at the month's end (macros.sql `status_at_month_end`): one that
--     started before the month's end and ended after it was RUNNING then, and
--     run_status says so;
--   * a FINISHED run that is production, or explicitly marked keep=true, keeps its newest
--     $keep_last_production checkpoints;
--   * every other run the tracker knows is dead (FAILED, KILLED, deleted in the tracker, or
--     a FINISHED experiment nobody asked to keep): it keeps none; a deleted run is dead even
--     if it was RUNNING at the month's end (the tracker keeps no time of the deletion);
--   * an orphan (a run folder whose run the tracker does not know) keeps none;
--   * nothing is a violation until it is older than $grace_days days at the month's end, so
--     a checkpoint written on the 30th is not flagged on the 31st.
-- The buckets are read as they stood at the month's end (the inventory snapshot).
WITH objects AS (
    -- the objects in run folders under a checkpoint prefix as they stood at the month's end,
    -- each with its run's class (live, production, dead, orphan) and its monthly cost: the
    -- macros.sql `checkpoint_objects` that storage_by_run_status sums too
    SELECT * FROM checkpoint_objects($month, $month_end)
),
checkpoints AS (
    -- a checkpoint is as new as its newest shard; only the runs keep-last applies to (live,
    -- production) are ranked: a dead run's or an orphan's objects break the policy anyway.
    -- A run's checkpoints are counted across every listed bucket (keep-last is per run: two
    -- buckets of 3 each kept 6), a checkpoint of one name in two buckets (a replica) once
    SELECT run_id, checkpoint_name, max(last_modified) AS newest
    FROM objects
    WHERE run_class IN ('live', 'production')
    GROUP BY run_id, checkpoint_name
),
ranked AS (
    -- 1 = the run's newest checkpoint; equal times are broken by name, the higher name
    -- (e.g. step-000300 over step-000200) counting as the newer one
    SELECT
        run_id, checkpoint_name,
        row_number() OVER (PARTITION BY run_id
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
    LEFT JOIN ranked AS k
      ON k.run_id = o.run_id AND k.checkpoint_name = o.checkpoint_name
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
    j.monthly_cost
FROM judged AS j
WHERE j.reason IS NOT NULL
  -- the grace period: strictly older than grace_days at the month's end
  AND j.last_modified < CAST($month_end AS TIMESTAMP) - INTERVAL ($grace_days) DAY
