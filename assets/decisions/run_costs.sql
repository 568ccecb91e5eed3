-- Run costs: what each run cost this month, by component — what goes back to the tracker.
--
-- One row per run with attribution rows this month (SPEC §12): the Σ of its rows' cost by
-- component, its accelerator-hours (Σ of the rows' share × x_UsageHours × G) and its
-- CPU-hours (the hours of its cpu rows). Model and search_id are those of the month's
-- tracker snapshot (one row per run there). A run's purpose class is the same on every row.
-- `tracker_cost_tags` sums these rows over every month into the MLflow run's `cost.*` tags;
-- `cost-pipeline export runs` writes them for trackers without write-back.
WITH tr AS (
    SELECT run_id, model, search_id FROM month_runs($month)  -- one row per run (macros.sql)
),
per_run AS (
    SELECT
        run_id,
        min(purpose_class)                                              AS purpose_class,
        coalesce(fsum(cost) FILTER (WHERE component = 'gpu'), 0)         AS gpu_cost,
        coalesce(fsum(cost) FILTER (WHERE component = 'cpu'), 0)         AS cpu_cost,
        coalesce(fsum(cost) FILTER (WHERE component = 'storage'), 0)     AS storage_cost,
        coalesce(fsum(cost) FILTER (WHERE component = 'network'), 0)     AS network_cost,
        coalesce(fsum(cost) FILTER (WHERE component NOT IN ('gpu', 'cpu', 'storage', 'network')),
                 0)                                                     AS other_cost,
        fsum(cost)                                                       AS cost,
        coalesce(fsum(accelerator_hours), 0)                             AS accelerator_hours,
        coalesce(fsum(hours) FILTER (WHERE component = 'cpu'), 0)        AS cpu_hours
    FROM attribution_runs
    WHERE month = $month AND run_id IS NOT NULL
    GROUP BY run_id
)
SELECT
    CAST($month AS DATE) AS month,
    p.run_id,
    r.model,
    p.purpose_class,
    r.search_id,
    p.gpu_cost,
    p.cpu_cost,
    p.storage_cost,
    p.network_cost,
    p.other_cost,
    p.cost,
    p.accelerator_hours,
    p.cpu_hours
FROM per_run AS p
LEFT JOIN tr AS r ON r.run_id = p.run_id
