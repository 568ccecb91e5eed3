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
),
per_run AS (
    -- per run first, then the model: the join and the run count see one row per run and
    -- class, not every row of the month
    SELECT month, run_id, purpose_class, component,
           fsum(cost) AS cost, fsum(accelerator_hours) AS accelerator_hours
    FROM attribution_runs
    WHERE month = $month
    GROUP BY ALL
)
SELECT
    p.month,
    r.model,
    p.purpose_class,
    p.component,
    fsum(p.cost)                                 AS cost,
    coalesce(fsum(p.accelerator_hours), 0)       AS accelerator_hours,
    count(p.run_id)                             AS runs     -- NULL run ids (untracked) not counted
FROM per_run AS p
LEFT JOIN runs AS r
  ON r.run_id = p.run_id
GROUP BY p.month, r.model, p.purpose_class, p.component
