-- Allocated vs used: the GPU-hours runs paid for but left idle.
--
-- A card at half utilization costs the same as a busy one. For every run that reports its
-- mean GPU utilization over the run (tracker column gpu_utilization, 0-100: a runs file
-- column, or MLflow's system/gpu_*_utilization_percentage metrics), its attributed GPU cost
-- and accelerator-hours this month are split into used and idle:
--     idle_accelerator_hours = accelerator_hours × (1 − utilization / 100)
--     idle_cost              = gpu_cost          × (1 − utilization / 100)
-- Runs without a utilization figure are not here (nothing says how busy they were).
WITH tr AS (
    SELECT * FROM month_runs($month)  -- one row per run (macros.sql)
),
gpu AS (
    SELECT
        run_id,
        min(purpose_class)                  AS purpose_class,
        coalesce(fsum(accelerator_hours), 0) AS accelerator_hours,
        fsum(cost)                           AS gpu_cost
    FROM attribution_runs
    WHERE month = $month AND component = 'gpu' AND run_id IS NOT NULL
    GROUP BY run_id
),
measured AS (
    SELECT
        g.*, r.model, r.gpus,
        least(100.0, greatest(0.0, r.gpu_utilization)) AS gpu_utilization
    FROM gpu AS g
    JOIN tr AS r ON r.run_id = g.run_id
    WHERE r.gpu_utilization IS NOT NULL
)
SELECT
    CAST($month AS DATE)                                   AS month,
    run_id,
    model,
    purpose_class,
    gpus,
    gpu_utilization,
    accelerator_hours,
    gpu_cost,
    accelerator_hours * (1 - gpu_utilization / 100)       AS idle_accelerator_hours,
    gpu_cost * (1 - gpu_utilization / 100)                AS idle_cost
FROM measured
