-- Search costs: what each hyperparameter search cost this month, and what it bought.
--
-- A search multiplies one training run into configs x seeds x re-runs. For every search that
-- was active this month we report that multiplier (runs, configs, seeds), the month's spend
-- on it, and the model-quality gain it produced over the best result the model had before
-- the search started - so "cost per point of AUC" can be put in front of whoever approves
-- the next search - and, beside it, what was approved before it ran (search_approvals:
-- `cost-pipeline estimate ... --approve`) against what it has cost so far.
--
-- Vocabulary used below (the macros of assets/macros.sql, shared with search_trend and
-- search_shape):
--   trial runs    - the runs of a search that actually train. Sweep controllers (runs that are
--                   the parent of other runs) only orchestrate: they are not counted as runs
--                   and their metrics are not the search's result.
--   all runs      - trial runs plus controllers. Money is counted on all of them (a controller
--                   may still own checkpoint storage), and the search starts when its first
--                   run, usually the controller, starts.
--   trials        - the trial runs grouped as search_shape groups them (search_trials): a run
--                   restarting (restart_of) a run of the same search, config and seed continues
--                   that trial. `runs` counts trial runs; configs without config ids, trials.
--   estimated_cost - the latest recorded estimate of the search (its latest approval row),
--                   when it is in the currency the search's spend is billed in: the
--                   approval's `currency` against the one currency of the months of its cost
--                   (`billing_months`; this month's when it has none yet, or when they are
--                   two). An estimate in another currency is no estimate of that spend (a EUR
--                   247 estimate held against JPY 24,691 read as a 9,900 % overrun): NULL,
--                   the check `searches_within_estimate` naming the search apart rather than
--                   failing it. An approval recorded before approvals carried a currency
--                   (`currency` NULL) is compared as before
--   cumulative_cost - the search's attributed cost in every materialized month up to and
--                   including this one (a month not materialized yet counts nothing); NULL
--                   when those months are billed in different currencies (`billing_months`:
--                   EUR and USD amounts do not add up, and the sum was shown under "$")
--   overrun       - cumulative_cost - estimated_cost (NULL without an estimate, or with one
--                   in another currency)
WITH search_runs AS (
    SELECT * FROM search_runs($month)
),
spend AS (
    -- the search's attributed cost (compute, storage, transfer) this month and in every month
    -- up to it, from one read of the per-run sums
    SELECT
        s.search_id,
        count(DISTINCT a.run_id) FILTER (WHERE NOT s.is_parent AND a.month = $month)
                                                                 AS runs_this_month,
        coalesce(fsum(a.hours) FILTER (WHERE a.month = $month), 0) AS hours,
        coalesce(fsum(a.accelerator_hours) FILTER (WHERE a.month = $month), 0)
                                                                 AS accelerator_hours,
        coalesce(fsum(a.cost) FILTER (WHERE a.month = $month), 0) AS cost,
        CASE WHEN count(DISTINCT coalesce(bm.currency, 'USD')) <= 1
             THEN coalesce(fsum(a.cost), 0) END                  AS cumulative_cost,
        CASE WHEN count(DISTINCT coalesce(bm.currency, 'USD')) = 1
             THEN min(coalesce(bm.currency, 'USD')) END          AS spend_currency
    FROM attribution_runs AS a
    JOIN search_runs AS s ON s.run_id = a.run_id
    LEFT JOIN month_currencies() AS bm ON bm.month = a.month
    WHERE a.month <= $month
    GROUP BY s.search_id
),
counts AS (
    -- the experiment-count multiplier, over the search's whole life (all months), of its trial
    -- runs (`search_trials`: sweep controllers are none). A search whose trials record no seed
    -- ran each once: one seed (as search_shape's seeds_per_config when no trial names a
    -- config), where a count of distinct seeds said 0 ("2 × 0"). `trials` counts a chain of
    -- restarts (restart_of, same config and seed) once, as search_shape's runs: the runs ÷
    -- seeds of a search naming no config counted each piece of a resumed trial ("2 × 1" for
    -- one trial resumed once, beside search_shape's 1 × 1)
    SELECT
        s.search_id,
        count(DISTINCT s.config_id)          AS distinct_configs,
        greatest(count(DISTINCT seed_key(s.seed)), 1)  AS seeds,
        count(DISTINCT t.trial_id)           AS trials
    FROM search_runs AS s
    JOIN search_trials($month, $month_start, $month_end) AS t ON t.run_id = s.run_id
    GROUP BY s.search_id
),
approval AS (
    -- the latest recording of each search counts (macros.sql)
    SELECT search_id, estimated_cost, upper(trim(currency)) AS currency
    FROM latest_approvals()
),
this_month AS (
    SELECT coalesce((SELECT currency FROM month_currencies() WHERE month = $month), 'USD')
               AS currency
),
estimate AS (
    -- the estimate held against the search's spend: one in the spend's currency, or one
    -- recorded without a currency
    SELECT ap.search_id, ap.estimated_cost
    FROM approval AS ap
    LEFT JOIN spend AS sp ON sp.search_id = ap.search_id
    CROSS JOIN this_month AS tm
    WHERE ap.currency IS NULL OR ap.currency = coalesce(sp.spend_currency, tm.currency)
),
scored AS (
    SELECT
        ac.search_id,
        i.model,
        i.metric_name,
        coalesce(i.runs, 0)                 AS runs,
        coalesce(c.distinct_configs, 0)     AS distinct_configs,
        coalesce(c.seeds, 0)                AS seeds,
        coalesce(c.trials, 0)               AS trials,
        b.best_metric,
        pb.previous_best,
        metric_improvement($metric_goal, b.best_metric, pb.previous_best) AS improvement
    FROM active_searches($month, $month_start, $month_end) AS ac
    LEFT JOIN search_identity($month) AS i ON i.search_id = ac.search_id
    LEFT JOIN counts AS c ON c.search_id = ac.search_id
    LEFT JOIN search_best($month, $metric_goal) AS b ON b.search_id = ac.search_id
    LEFT JOIN search_previous_best($month, $metric_goal) AS pb ON pb.search_id = ac.search_id
)
SELECT
    CAST($month AS DATE)                        AS month,
    s.search_id,
    s.model,
    -- runs, not trials: every trial run, each piece of a restarted trial counted
    s.runs,
    -- distinct configurations tried; when the tracker records no config ids, estimate them
    -- as trials per seed (each config is typically repeated once per seed), a fraction where
    -- search_shape rounds up
    CASE
        WHEN s.distinct_configs > 0 THEN CAST(s.distinct_configs AS DOUBLE)
        ELSE CAST(s.trials AS DOUBLE) / greatest(s.seeds, 1)
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
    -- what one unit of improvement cost this month; meaningless (NULL) when nothing improved,
    -- or when the month cost nothing or was a credit (a refund): nothing paid, no price
    CASE WHEN s.improvement > 0 AND sp.cost > 0 THEN sp.cost / s.improvement END
                                                AS cost_per_improvement,
    CASE WHEN s.improvement > 0 THEN coalesce(sp.accelerator_hours, 0) / s.improvement END
                                                AS accelerator_hours_per_improvement,
    ap.estimated_cost,
    CASE WHEN sp.search_id IS NULL THEN 0 ELSE sp.cumulative_cost END AS cumulative_cost,
    CASE WHEN sp.search_id IS NULL THEN 0 ELSE sp.cumulative_cost END - ap.estimated_cost
                                                AS overrun
FROM scored AS s
LEFT JOIN spend    AS sp ON sp.search_id = s.search_id
LEFT JOIN estimate AS ap ON ap.search_id = s.search_id
