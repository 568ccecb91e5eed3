-- Run costs: what each run cost this month, by component — what goes back to the tracker.
--
-- One row per run with attribution rows this month (SPEC §12): the Σ of its rows' cost by
-- component, its accelerator-hours (Σ of the rows' share × x_UsageHours × G) and its
-- CPU-hours (the hours of its cpu rows). Summed exactly, as the reports sum (DECIMAL, each
-- row's cost cast first: `cost_exact`; the hours alike), and kept as the double of that Σ:
-- five rows of $0.011 are 0.055, not the doubles' Σ 0.05499999999999999 (that rounds to
-- 0.05). Model and search_id are those of the month's tracker snapshot (one row per run
-- there). A run's purpose class is the same on every row.
-- `tracker_cost_tags` sums these rows over every month into the MLflow run's `cost.*` tags;
-- `cost-pipeline export runs` writes them for trackers without write-back.
WITH tr AS (
    SELECT run_id, model, search_id FROM month_runs($month)  -- one row per run (macros.sql)
),
exact AS (  -- the month's per-run sums as DECIMAL, hours too (macros.sql, as the cost.* tags)
    SELECT * FROM exact_run_sums() WHERE month = $month
),
per_run AS (
    SELECT
        run_id,
        min(purpose_class)                                               AS purpose_class,
        -- gpu, cpu, storage, network, other (macros.sql, as the cost.* tags split them)
        component_split(dollars, component)                              AS by_component,
        sum(dollars)                                                     AS cost,
        coalesce(sum(accelerator_hours), 0)                              AS accelerator_hours,
        coalesce(sum(hours) FILTER (WHERE component = 'cpu'), 0)         AS cpu_hours
    FROM exact
    GROUP BY run_id
)
SELECT
    CAST($month AS DATE) AS month,
    p.run_id,
    r.model,
    p.purpose_class,
    r.search_id,
    CAST(p.by_component.gpu AS DOUBLE)     AS gpu_cost,
    CAST(p.by_component.cpu AS DOUBLE)     AS cpu_cost,
    CAST(p.by_component.storage AS DOUBLE) AS storage_cost,
    CAST(p.by_component.network AS DOUBLE) AS network_cost,
    CAST(p.by_component.other AS DOUBLE)   AS other_cost,
    CAST(p.cost AS DOUBLE)              AS cost,
    CAST(p.accelerator_hours AS DOUBLE) AS accelerator_hours,
    CAST(p.cpu_hours AS DOUBLE)         AS cpu_hours
FROM per_run AS p
LEFT JOIN tr AS r ON r.run_id = p.run_id
