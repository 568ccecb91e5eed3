-- Cost per model per month: the headline split of the bill.
--
-- Every dollar of the month's attribution is here exactly once (tracked runs, untracked and
-- unallocated alike), so the rows add up to the month's total EffectiveCost. The interesting
-- comparison is, for one model, 'production' against 'search': a hyperparameter search turns
-- one training run into hundreds, and `runs` shows that multiplier directly.
-- Untracked and unallocated cost has no run and so no model (model is NULL).
WITH runs AS (
    -- the tracker snapshot stored under this month; one row per run even if two tracker
    -- sources report the same run id (so a dollar is never counted twice)
    SELECT run_id, min(model) AS model
    FROM tracker_runs
    WHERE month = $month
    GROUP BY run_id
)
SELECT
    a.month,
    r.model,
    a.purpose_class,
    a.component,
    sum(a.cost)                                 AS cost,
    coalesce(sum(a.accelerator_hours), 0)       AS accelerator_hours,
    count(DISTINCT a.run_id)                    AS runs     -- NULL run ids (untracked) not counted
FROM attribution AS a
LEFT JOIN runs AS r
  ON r.run_id = a.run_id
WHERE a.month = $month
GROUP BY a.month, r.model, a.purpose_class, a.component
