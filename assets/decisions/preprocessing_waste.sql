-- Preprocessing waste: compute a feature cache would have saved, and runs that trained on a
-- stale cached table. One row per flagged run, priced with its attributed cost this month.
--
-- kind = 'recomputed'. A preprocess run (purpose preprocess) turns an input (input_hash) into
-- a table with a transform (transform_version). The pair's first computation is the
-- preprocess run of that pair that finished first, by (end, start_time, run_id), of those
-- that did not fail (FAILED and KILLED runs computed nothing): its end is its end_time; one
-- without an end_time finished at its start unless it is still RUNNING (then it has not
-- finished, and computed nothing yet). Every other preprocess run of the pair that started
-- when it had finished - in the same wave or months later, finished or not - recomputed a
-- table that already existed: with a cache keyed by (input_hash, transform_version) it would
-- not have run. Its CPU-hours, accelerator-hours and cost this month are what the cache saves.
-- A run that started while the first computation was still running is not flagged: no cache
-- could have served a table that did not exist yet. The whole tracker snapshot counts, so a
-- pair computed in an earlier month is still cached.
--
-- kind = 'stale_transform'. A version is available for an input from the end of its first
-- FINISHED preprocess run. A run that is not a preprocess run (production, search, eval,
-- adhoc) and names an input_hash and transform_version used a stale table when, at its start,
-- a newer version of that input was available: its own version was available before the run
-- started, and another version became available later than it and still before the run
-- started ("newer" = became available later; version names are not compared). A version no
-- tracked preprocess run produced before the run started cannot be dated and is not flagged.
-- The cost shown is the compute spent on outdated features: the run's cost this month of the
-- lines it claimed by resource (rule compute: its instances, volumes, jobs), not its share of
-- a bucket's storage or transfer - its checkpoints, still billed months after it trained.
--
-- Rows: flagged runs that have attributed cost this month (a stale run: compute cost), or that
-- started this month (so a run nobody could price still appears once). cost_levers prices
-- caching with 'recomputed' (a recomputation's whole cost: its run and the table it kept).
WITH tr AS (
    SELECT * FROM month_runs($month)  -- one row per run (macros.sql)
),
preprocess AS (
    SELECT *
    FROM tr
    WHERE purpose = 'preprocess' AND input_hash IS NOT NULL AND transform_version IS NOT NULL
),
first_computation AS (
    -- the pair's computation that finished first, and when
    SELECT input_hash, transform_version, run_id, finished_at
    FROM (SELECT *, CASE WHEN end_time IS NOT NULL THEN end_time
                         WHEN status IS DISTINCT FROM 'RUNNING' THEN start_time END AS finished_at
          FROM preprocess
          WHERE status NOT IN ('FAILED', 'KILLED'))
    WHERE finished_at IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY input_hash, transform_version
                               ORDER BY finished_at, start_time, run_id) = 1
),
recomputed AS (
    SELECT
        'recomputed' AS kind, p.run_id, p.purpose, p.model, p.status, p.start_time,
        p.input_hash, p.transform_version,
        p.transform_version AS current_transform_version,
        f.run_id AS reference_run_id
    FROM preprocess AS p
    JOIN first_computation AS f USING (input_hash, transform_version)
    WHERE p.run_id <> f.run_id AND p.start_time >= f.finished_at
),
available AS (
    -- when each (input_hash, transform_version) table first existed, and who made it
    SELECT input_hash, transform_version, run_id AS reference_run_id, end_time AS available_at
    FROM preprocess
    WHERE status = 'FINISHED' AND end_time IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY input_hash, transform_version
                               ORDER BY end_time, run_id) = 1
),
consumers AS (
    SELECT *
    FROM tr
    WHERE purpose IS DISTINCT FROM 'preprocess'
      AND input_hash IS NOT NULL AND transform_version IS NOT NULL
),
newest AS (
    -- the newest version of the consumer's input available when it started
    SELECT c.run_id, v.transform_version, v.reference_run_id, v.available_at
    FROM consumers AS c
    JOIN available AS v ON v.input_hash = c.input_hash AND v.available_at <= c.start_time
    QUALIFY row_number() OVER (PARTITION BY c.run_id
                               ORDER BY v.available_at DESC, v.transform_version DESC) = 1
),
stale AS (
    SELECT
        'stale_transform' AS kind, c.run_id, c.purpose, c.model, c.status, c.start_time,
        c.input_hash, c.transform_version,
        n.transform_version AS current_transform_version,
        n.reference_run_id
    FROM consumers AS c
    JOIN available AS own
      ON own.input_hash = c.input_hash AND own.transform_version = c.transform_version
     AND own.available_at <= c.start_time
    JOIN newest AS n ON n.run_id = c.run_id
    WHERE n.transform_version <> c.transform_version
      AND own.available_at < n.available_at
),
flagged AS (
    SELECT * FROM recomputed
    UNION ALL
    SELECT * FROM stale
),
flagged_runs AS MATERIALIZED (
    -- the flagged runs' ids, materialized: the semi-join below then hashes these few ids,
    -- and only their per-run rows are summed (every run's were: 0.3 s at a million runs,
    -- for no flagged run at all)
    SELECT DISTINCT run_id FROM flagged
),
month_cost AS (
    SELECT
        run_id,
        coalesce(fsum(hours) FILTER (WHERE component = 'cpu'), 0) AS cpu_hours,
        coalesce(fsum(accelerator_hours), 0)                      AS accelerator_hours,
        fsum(cost)                                                AS cost,
        fsum(cost) FILTER (WHERE rule = 'compute')                AS compute_cost
    FROM attribution_runs
    WHERE month = $month AND run_id IN (SELECT run_id FROM flagged_runs)
    GROUP BY run_id
)
SELECT
    CAST($month AS DATE)              AS month,
    f.kind,
    f.run_id,
    f.purpose,
    f.model,
    f.status,
    f.start_time,
    f.input_hash,
    f.transform_version,
    f.current_transform_version,
    f.reference_run_id,
    coalesce(mc.cpu_hours, 0)         AS cpu_hours,
    coalesce(mc.accelerator_hours, 0) AS accelerator_hours,
    coalesce(CASE f.kind WHEN 'stale_transform' THEN mc.compute_cost ELSE mc.cost END, 0)
                                      AS cost
FROM flagged AS f
LEFT JOIN month_cost AS mc ON mc.run_id = f.run_id
WHERE (CASE f.kind WHEN 'stale_transform' THEN mc.compute_cost ELSE mc.cost END) IS NOT NULL
   OR (f.start_time >= $month_start AND f.start_time < $month_end)
