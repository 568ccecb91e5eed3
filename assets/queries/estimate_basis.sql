-- What one more search run of a model is likely to cost, from its recorded search runs:
-- per run, its wall-clock hours, its GPU-hours and GPU cost, and the rest of its recorded
-- cost, every other component — its own CPU, checkpoint storage, data transfer and other —
-- plus the model's preprocessing (shared out over the training runs of the same months). The
-- most recent $sample runs are the basis. A run's GPU part is its recorded GPU-hours (a run
-- on two nodes of 4 GPUs holds 8, where the tracker's `gpus` counts each node's) at the
-- basis's price per GPU-hour: the median run's GPU-hours, shown as GPUs (= those GPU-hours
-- over the median hours) × the median hours — the median of GPUs times the median of hours
-- is no recorded run's (runs of 1 GPU × 10 h and of 8 GPUs × 1 h made 8 × 10). With the
-- currencies the basis runs were billed in (one expected: amounts of two do not add up).
-- With $currency, only what was billed in it: the runs all of whose months were, the
-- preprocessing of such months, the training runs started in them (a basis of two currencies
-- priced in one of them adds no amount of the other). Parameters: $model, $sample, $currency
-- (NULL: every month's).
WITH runs AS (
    -- the newest tracker snapshot of each run
    SELECT * FROM tracker_runs
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY month DESC) = 1
),
-- each month's currency as macros.sql `month_currencies` reads it (no macros here); a month
-- without a row of `billing_months` is in USD
month_currencies AS (
    SELECT month, min(upper(trim(currency))) AS currency FROM billing_months GROUP BY month
),
trials AS (
    SELECT r.* FROM runs r
    WHERE r.model = $model AND (r.purpose = 'search' OR r.search_id IS NOT NULL)
      AND r.end_time IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_run_id = r.run_id)
),
spend AS (
    -- from the per-run sums of every month (attribution_runs.sql), not every attribution row:
    -- a warehouse of many months holds hundreds of millions of those
    SELECT a.run_id,
        fsum(a.accelerator_hours) FILTER (WHERE a.component = 'gpu') AS gpu_hours,
        fsum(a.cost) FILTER (WHERE a.component = 'gpu') AS gpu_cost,
        fsum(a.cost) FILTER (WHERE a.component = 'cpu') AS cpu_cost,
        fsum(a.cost) FILTER (WHERE a.component = 'storage') AS storage_cost,
        fsum(a.cost) FILTER (WHERE a.component = 'network') AS transfer_cost,
        fsum(a.cost) FILTER (WHERE a.component NOT IN ('gpu', 'cpu', 'storage', 'network'))
            AS other_cost
    FROM attribution_runs a
    LEFT JOIN month_currencies mc ON mc.month = a.month
    WHERE a.run_id IN (SELECT run_id FROM trials)
    GROUP BY a.run_id
    -- a run billed in a month of another currency too is no run of this one
    HAVING $currency IS NULL
        OR bool_and(coalesce(mc.currency, 'USD') = upper(trim($currency)))
),
recent AS (
    SELECT t.run_id, t.start_time, t.end_time,
        epoch(t.end_time - t.start_time) / 3600.0 AS wall_hours,
        coalesce(s.gpu_hours, 0) AS gpu_hours,
        coalesce(s.gpu_cost, 0) AS gpu_cost,
        coalesce(s.cpu_cost, 0) AS cpu_cost,
        coalesce(s.storage_cost, 0) AS storage_cost,
        coalesce(s.transfer_cost, 0) AS transfer_cost,
        coalesce(s.other_cost, 0) AS other_cost
    FROM trials t JOIN spend s ON s.run_id = t.run_id
    -- the runs that held GPUs; a model searched on CPUs alone is priced from all its runs
    WHERE s.gpu_hours > 0 OR NOT coalesce((SELECT bool_or(gpu_hours > 0) FROM spend), false)
    ORDER BY t.start_time DESC, t.run_id
    LIMIT $sample
),
preprocessing AS (
    -- preprocessing of the model in the basis's time span (from two days before its first
    -- run: the data a search trains on is prepared before it), per training run of that
    -- same span
    SELECT
        coalesce(fsum(a.cost), 0) AS cost,
        (SELECT count(*) FROM runs r
          WHERE r.model = $model AND coalesce(r.purpose, '') NOT IN ('preprocess', 'eval', 'adhoc')
            AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_run_id = r.run_id)
            AND r.start_time BETWEEN (SELECT min(start_time) FROM recent) - INTERVAL 2 DAY
                                 AND (SELECT max(start_time) FROM recent)
            AND ($currency IS NULL OR coalesce(
                    (SELECT started.currency FROM month_currencies started
                      WHERE started.month = date_trunc('month', r.start_time)), 'USD')
                = upper(trim($currency)))) AS training_runs
    FROM attribution_runs a JOIN runs r ON a.run_id = r.run_id
    LEFT JOIN month_currencies mc ON mc.month = a.month
    WHERE r.model = $model AND r.purpose = 'preprocess'
      AND ($currency IS NULL OR coalesce(mc.currency, 'USD') = upper(trim($currency)))
      AND r.start_time >= (SELECT min(start_time) FROM recent) - INTERVAL 2 DAY
      AND r.start_time <= (SELECT max(start_time) FROM recent)
)
SELECT
    (SELECT count(*) FROM recent) AS sample_runs,
    -- (runs that held no GPU: 0 GPUs, whatever their length; NULL for runs of no length
    -- that held some — no GPUs × hours tells them)
    (SELECT CASE WHEN median(gpu_hours) = 0 THEN 0
            ELSE median(gpu_hours) / nullif(median(wall_hours), 0) END FROM recent) AS gpus,
    (SELECT median(wall_hours) FROM recent) AS hours,
    (SELECT median(gpu_hours) FROM recent) AS gpu_hours_per_run,
    -- per GPU-hour; 0 for runs that held none (their GPU part is 0 GPUs × hours × 0)
    (SELECT CASE WHEN count(*) > 0 THEN coalesce(fsum(gpu_cost) / nullif(fsum(gpu_hours), 0), 0)
            END FROM recent) AS price,
    (SELECT median(cpu_cost) FROM recent) AS cpu_per_run,
    (SELECT median(storage_cost) FROM recent) AS storage_per_run,
    (SELECT median(transfer_cost) FROM recent) AS transfer_per_run,
    (SELECT median(other_cost) FROM recent) AS other_per_run,
    (SELECT cost / nullif(training_runs, 0) FROM preprocessing) AS preprocessing_per_run,
    (SELECT string_agg(DISTINCT coalesce(b.currency, 'USD'), ',' ORDER BY coalesce(b.currency, 'USD'))
       FROM (SELECT DISTINCT month FROM attribution_runs
             WHERE run_id IN (SELECT run_id FROM recent)) AS m
       LEFT JOIN month_currencies AS b USING (month)) AS currencies
