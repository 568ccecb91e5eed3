-- Every run's cost over all the months the warehouse holds, by the MLflow run it was in each
-- month: what the `cost.*` tags of an MLflow run say (SPEC §12; ingest/sources/mlflow_tags.py
-- adds up, formats and writes them). A row per run id × the MLflow run id its month's
-- tracker snapshot recorded (`tracker_runs.tracker_run_uuid`: a run renamed in MLflow since
-- is still that month's run, and a new run taking its name is not), NULL for the months
-- without one (a runs file, a month written before the column: the writer matches those by
-- run id), with `source`, the tracker that told the run in the latest of those months.
-- The runs and months are those of `run_costs`; the amounts are summed exactly from the
-- DECIMAL sums they came from (`attribution_runs.cost_exact`, the hours each cast first), as
-- the reports sum: `run_costs` keeps the double of each sum, and a double cast back is not
-- the sum (1048576.005 → 1048576.0049999998 → 1048576.00, a cent below the report); five
-- months of $0.011 are 0.055 → 0.06 (the doubles' Σ 0.05499999999999999 gave 0.05). With
-- the currencies its months are billed in (`billing_months`, one a month, SPEC §5; a month
-- without its bill counts as USD, as the reports do): amounts of months in two currencies
-- do not add up, and the writer leaves them out.
WITH run_months AS (
    -- (tracker_runs holds a run once a month, SPEC §4: one MLflow run id a month)
    SELECT c.month, c.run_id, t.tracker_run_uuid AS mlflow_run_id, t.source
    FROM (SELECT DISTINCT month, run_id FROM run_costs) AS c
    LEFT JOIN tracker_runs AS t ON t.month = c.month AND t.run_id = c.run_id
),
month_currency AS (
    SELECT m.month, coalesce(b.currency, 'USD') AS currency
    FROM (SELECT DISTINCT month FROM run_months) AS m
    LEFT JOIN month_currencies() AS b USING (month)
),
exact AS (  -- each per-run sum of attribution_runs as DECIMAL (macros.sql, as run_costs)
    SELECT run_id, mlflow_run_id, component, dollars, accelerator_hours
    FROM exact_run_sums()
    JOIN run_months USING (month, run_id)
),
amounts AS (
    SELECT
        run_id,
        mlflow_run_id,
        sum(dollars)                                                     AS total_usd,
        -- gpu, cpu, storage, network, other (macros.sql, as run_costs splits them)
        component_split(dollars, component)                              AS usd,
        coalesce(sum(accelerator_hours), 0)                              AS gpu_hours
    FROM exact
    GROUP BY run_id, mlflow_run_id
),
months AS (
    SELECT
        run_id,
        mlflow_run_id,
        arg_max(source, month)                                        AS source,
        list(DISTINCT strftime(month, '%Y-%m') ORDER BY strftime(month, '%Y-%m'))
                                                                      AS months,
        list(DISTINCT currency ORDER BY currency)                     AS currencies
    FROM run_months
    JOIN month_currency USING (month)
    GROUP BY run_id, mlflow_run_id
)
SELECT
    m.run_id, m.mlflow_run_id, m.source, a.total_usd, a.usd.gpu AS gpu_usd,
    a.usd.cpu AS cpu_usd, a.usd.storage AS storage_usd, a.usd.network AS network_usd,
    a.usd.other AS other_usd, a.gpu_hours, m.months, m.currencies
FROM months AS m
LEFT JOIN amounts AS a
  ON a.run_id = m.run_id AND a.mlflow_run_id IS NOT DISTINCT FROM m.mlflow_run_id
ORDER BY m.run_id, m.mlflow_run_id NULLS FIRST
