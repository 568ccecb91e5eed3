-- Retrain cadence: per model with production runs started in the month, how often it is
-- retrained, why, what that costs, and whether the metric moved (SPEC §12) — the lever
-- "retrain on measured decay" is Σ flat_retrain_cost.
--
-- Definitions (the month's tracker snapshot, one row per run; costs are this month's
-- attribution):
--   production run      purpose production and no search_id (a run with a search_id is
--                       search, as in attribution's purpose class)
--   retrains            the model's production runs started in the month
--   by_trigger          those retrains counted by `trigger`: schedule, drift, manual, unknown
--                       (no trigger recorded, or another word); also as the four
--                       *_retrains columns
--   median_days_between the median gap, in days, between consecutive production starts of the
--                       model within the 6 months ending with this one; NULL with < 2 starts
--   cost                the model's production cost this month (every production run, also
--                       one started in an earlier month)
--   search_cost         the model's search cost this month
--   metric change       a retrain's metric_value minus that of the model's previous
--                       production run (the latest started strictly before it, any month;
--                       of runs started at that instant the one that ended last, then the
--                       greatest run id: a retrain started with another at one instant is
--                       never measured against it), to 10 decimal places (0.813 −
--                       0.811 is 0.002, not the doubles' 0.0019999999999998908); NULL when
--                       either is missing, or when the two name different metric_names (auc
--                       minus logloss)
--   mean_metric_change  the mean of the retrains' metric changes (NULL when none is known)
--   flat_retrains       retrains not triggered by drift whose |metric change| <
--                       policy.retrain.min_metric_change (strict: a change of exactly the
--                       threshold is not flat): a retrain whose change is unknown is never
--                       flat (nothing measured it)
--   flat_retrain_cost   those retrains' cost this month
WITH runs AS (
    SELECT * FROM month_runs($month)
),
production AS (
    -- each production run against its model's previous one (macros.sql `production_runs`:
    -- started strictly earlier; of runs started at one instant, the one that ended last, then
    -- the greatest run id). A change is between values of one metric: an auc minus a logloss
    -- is none (a run that names no metric is taken to use the other's, as a search's trials
    -- are)
    SELECT
        run_id, model, start_time, trigger, metric_value,
        CASE WHEN metric_name <> previous.metric_name THEN NULL
             ELSE round(metric_value - previous.metric_value, 10) END AS metric_change
    FROM production_runs($month)
),
month_production AS MATERIALIZED (
    -- the retrains: materialized, so that only their per-run rows are summed below (every
    -- run's were, 0.13 s of 0.63 at a million runs)
    SELECT *
    FROM production
    WHERE start_time >= CAST($month_start AS TIMESTAMP)
      AND start_time < CAST($month_end AS TIMESTAMP)
),
run_spend AS (
    SELECT run_id, fsum(cost) AS cost
    FROM attribution_runs
    WHERE month = $month AND run_id IN (SELECT run_id FROM month_production)
    GROUP BY run_id
),
retrains AS (
    SELECT
        p.*,
        coalesce(s.cost, 0) AS cost,
        coalesce(p.trigger, '') <> 'drift'
            AND (abs(p.metric_change) < round($min_metric_change, 10)) IS TRUE AS flat
    FROM month_production AS p
    LEFT JOIN run_spend AS s ON s.run_id = p.run_id
),
gaps AS (
    -- consecutive production starts within the 6 months ending with this one
    SELECT model,
           epoch(start_time - lag(start_time) OVER (PARTITION BY model
                                                    ORDER BY start_time, run_id)) / 86400.0
               AS days
    FROM production
    WHERE start_time >= CAST($month_start AS TIMESTAMP) - INTERVAL 5 MONTH
      AND start_time < CAST($month_end AS TIMESTAMP)
),
cadence AS (
    SELECT model, median(days) AS median_days_between
    FROM gaps
    WHERE days IS NOT NULL
    GROUP BY model
),
model_spend AS (
    SELECT
        r.model,
        coalesce(fsum(a.cost) FILTER (WHERE a.purpose_class = 'production'), 0) AS cost,
        coalesce(fsum(a.cost) FILTER (WHERE a.purpose_class = 'search'), 0) AS search_cost
    FROM attribution_runs AS a
    JOIN runs AS r ON r.run_id = a.run_id
    WHERE a.month = $month
    GROUP BY r.model
),
per_model AS (
    SELECT
        model,
        count(*)                                                        AS retrains,
        count(*) FILTER (WHERE trigger = 'schedule')                    AS schedule_retrains,
        count(*) FILTER (WHERE trigger = 'drift')                       AS drift_retrains,
        count(*) FILTER (WHERE trigger = 'manual')                      AS manual_retrains,
        count(*) FILTER (WHERE trigger IS NULL
                         OR trigger NOT IN ('schedule', 'drift', 'manual'))  AS unknown_retrains,
        -- fsum, not avg: the same figure whatever order the rows are added in
        fsum(metric_change) / nullif(count(metric_change), 0)           AS mean_metric_change,
        count(*) FILTER (WHERE flat)                                    AS flat_retrains,
        coalesce(fsum(cost) FILTER (WHERE flat), 0)                      AS flat_retrain_cost
    FROM retrains
    GROUP BY model
)
SELECT
    CAST($month AS DATE) AS month,
    p.model,
    p.retrains,
    {'schedule': p.schedule_retrains, 'drift': p.drift_retrains,
     'manual': p.manual_retrains, 'unknown': p.unknown_retrains}      AS by_trigger,
    p.schedule_retrains,
    p.drift_retrains,
    p.manual_retrains,
    p.unknown_retrains,
    c.median_days_between,
    coalesce(s.cost, 0)                                                 AS cost,
    coalesce(s.search_cost, 0)                                          AS search_cost,
    p.mean_metric_change,
    p.flat_retrains,
    p.flat_retrain_cost
FROM per_model AS p
LEFT JOIN cadence AS c ON c.model = p.model
LEFT JOIN model_spend AS s ON s.model = p.model
ORDER BY p.model
