-- Search costs: what each hyperparameter search cost this month, and what it bought.
--
-- A search multiplies one training run into configs x seeds x re-runs. For every search that
-- was active this month we report that multiplier (runs, configs, seeds), the month's spend
-- on it, and the model-quality gain it produced over the best result the model had before
-- the search started - so "cost per point of AUC" can be put in front of whoever approves
-- the next search.
--
-- Vocabulary used below:
--   trial runs    - the runs of a search that actually train. Sweep controllers (runs that are
--                   the parent of other runs) only orchestrate: they are not counted as runs
--                   and their metrics are not the search's result.
--   all runs      - trials plus controllers. Money is counted on all of them (a controller
--                   may still own checkpoint storage), and the search starts when its first
--                   run, usually the controller, starts.
WITH tr AS (
    -- the tracker snapshot (every run the tracker knows, stored under each month);
    -- one row per run id in case two tracker sources report the same run
    SELECT *
    FROM tracker_runs
    WHERE month = $month
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY source NULLS LAST, start_time) = 1
),
parents AS (
    SELECT DISTINCT parent_run_id AS run_id
    FROM tr
    WHERE parent_run_id IS NOT NULL
),
search_runs AS (
    SELECT tr.*, (p.run_id IS NOT NULL) AS is_parent
    FROM tr
    LEFT JOIN parents AS p ON p.run_id = tr.run_id
    WHERE tr.search_id IS NOT NULL
),
trials AS (
    SELECT * FROM search_runs WHERE NOT is_parent
),
spend AS (
    -- this month's attributed cost of the search (compute, storage, transfer)
    SELECT
        s.search_id,
        count(DISTINCT a.run_id) FILTER (WHERE NOT s.is_parent) AS runs_this_month,
        coalesce(sum(a.hours), 0)                               AS hours,
        coalesce(sum(a.accelerator_hours), 0)                   AS accelerator_hours,
        coalesce(sum(a.cost), 0)                                AS cost
    FROM attribution AS a
    JOIN search_runs AS s ON s.run_id = a.run_id
    WHERE a.month = $month
    GROUP BY s.search_id
),
active AS (
    -- a search is active in the month when it was billed this month, or when one of its runs
    -- was running at some point of the month (a run with no end yet counts as still running)
    SELECT search_id FROM spend
    UNION
    SELECT search_id
    FROM search_runs
    WHERE start_time < $month_end
      AND coalesce(end_time, $month_end) > $month_start
),
counts AS (
    -- the experiment-count multiplier, over the search's whole life (all months)
    SELECT
        search_id,
        count(DISTINCT run_id)    AS runs,
        count(DISTINCT config_id) AS distinct_configs,
        count(DISTINCT seed)      AS seeds
    FROM trials
    GROUP BY search_id
),
model_pick AS (
    -- the model the search tunes: its trials' model (the most common one if they disagree)
    SELECT search_id, model
    FROM (SELECT search_id, model, count(*) AS n
          FROM trials WHERE model IS NOT NULL GROUP BY search_id, model)
    QUALIFY row_number() OVER (PARTITION BY search_id ORDER BY n DESC, model) = 1
),
metric_pick AS (
    SELECT search_id, metric_name
    FROM (SELECT search_id, metric_name, count(*) AS n
          FROM trials WHERE metric_name IS NOT NULL GROUP BY search_id, metric_name)
    QUALIFY row_number() OVER (PARTITION BY search_id ORDER BY n DESC, metric_name) = 1
),
best AS (
    -- the search's result: its trials' best value of the search's own metric (a trial that
    -- logged another metric is not comparable; one that names no metric is taken to use it)
    SELECT
        t.search_id,
        CASE WHEN $metric_goal = 'min' THEN min(t.metric_value) ELSE max(t.metric_value) END
            AS best_metric
    FROM trials AS t
    LEFT JOIN metric_pick AS mt ON mt.search_id = t.search_id
    WHERE t.metric_name IS NULL OR mt.metric_name IS NULL OR t.metric_name = mt.metric_name
    GROUP BY t.search_id
),
started AS (
    SELECT search_id, min(start_time) AS first_start
    FROM search_runs
    GROUP BY search_id
),
searches AS (
    SELECT
        ac.search_id,
        m.model,
        mt.metric_name,
        st.first_start,
        coalesce(c.runs, 0)                 AS runs,
        coalesce(c.distinct_configs, 0)     AS distinct_configs,
        coalesce(c.seeds, 0)                AS seeds,
        b.best_metric
    FROM active AS ac
    LEFT JOIN counts      AS c  ON c.search_id  = ac.search_id
    LEFT JOIN best        AS b  ON b.search_id  = ac.search_id
    LEFT JOIN model_pick  AS m  ON m.search_id  = ac.search_id
    LEFT JOIN metric_pick AS mt ON mt.search_id = ac.search_id
    LEFT JOIN started     AS st ON st.search_id = ac.search_id
),
baseline AS (
    -- the model's best result before this search started: production runs (not part of any
    -- search) and runs of other searches that had finished by then. Only results on the same
    -- metric are comparable (a run that names no metric is taken to use the search's).
    SELECT
        s.search_id,
        CASE WHEN $metric_goal = 'min' THEN min(p.metric_value) ELSE max(p.metric_value) END
            AS previous_best
    FROM searches AS s
    JOIN tr AS p
      ON p.model = s.model
     AND ((p.purpose = 'production' AND p.search_id IS NULL)
          OR (p.search_id IS NOT NULL AND p.search_id <> s.search_id))
     AND coalesce(p.end_time, p.start_time) < s.first_start
     AND (p.metric_name IS NULL OR s.metric_name IS NULL OR p.metric_name = s.metric_name)
    GROUP BY s.search_id
),
scored AS (
    SELECT
        s.*,
        b.previous_best,
        -- improvement is always "better is positive": higher for max metrics (AUC), lower for
        -- min metrics (loss)
        CASE
            WHEN b.previous_best IS NULL OR s.best_metric IS NULL THEN NULL
            WHEN $metric_goal = 'min' THEN b.previous_best - s.best_metric
            ELSE s.best_metric - b.previous_best
        END AS improvement
    FROM searches AS s
    LEFT JOIN baseline AS b ON b.search_id = s.search_id
)
SELECT
    CAST($month AS DATE)                        AS month,
    s.search_id,
    s.model,
    s.runs,
    -- distinct configurations tried; when the tracker records no config ids, estimate them
    -- as runs per seed (each config is typically repeated once per seed)
    CASE
        WHEN s.distinct_configs > 0 THEN CAST(s.distinct_configs AS DOUBLE)
        ELSE CAST(s.runs AS DOUBLE) / greatest(s.seeds, 1)
    END                                         AS configs,
    s.seeds,
    coalesce(sp.runs_this_month, 0)             AS runs_this_month,
    coalesce(sp.hours, 0)                       AS hours,
    coalesce(sp.accelerator_hours, 0)           AS accelerator_hours,
    coalesce(sp.cost, 0)                        AS cost,
    s.metric_name,
    s.best_metric,
    s.previous_best,
    s.improvement,
    -- what one unit of improvement cost this month; meaningless (NULL) when nothing improved
    CASE WHEN s.improvement > 0 THEN coalesce(sp.cost, 0) / s.improvement END
                                                AS cost_per_improvement,
    CASE WHEN s.improvement > 0 THEN coalesce(sp.accelerator_hours, 0) / s.improvement END
                                                AS accelerator_hours_per_improvement
FROM scored AS s
LEFT JOIN spend AS sp ON sp.search_id = s.search_id
