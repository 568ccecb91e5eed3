-- Search shape: per search active in the month, how its runs multiply (configs x seeds, a full
-- grid or not, configs repeated from an earlier search of the model) and the part of this
-- month's cost that shape puts in question - the lever "bound the search" (SPEC §12).
--
-- Definitions (trials = the search's runs that are not sweep controllers, all months of the
-- tracker snapshot, a run whose restart_of names another run of the search with the same
-- config_id and seed being that trial continued - transitively, resumed from a checkpoint or
-- restarted from scratch (SPEC §12) - so one trial may be several runs: the table macro
-- search_trials, which search_costs reads too; costs are this month's attribution, a trial's
-- all its runs'):
--   runs              the trials (search_costs.runs counts runs: a restarted trial's each)
--   configs           as search_costs.configs (SPEC §7): distinct config_id; a trial without
--                     config_id is in no config when others name one (runs_without_config
--                     counts it). When no trial names a config: trials ÷ distinct seeds, rounded
--                     up when the division is not exact (search_costs keeps the fraction, of
--                     the same trials; this column is whole: the fewest configs that hold them)
--   seeds_per_config  the most seeds any config has: its distinct seeds, a trial without a seed
--                     a seed of its own (as extra_seed_cost takes it: the earlier start is the
--                     first seed); grid = every config has that many seeds. When no trial
--                     names a config: the distinct seeds (at least 1, the divisor of configs),
--                     and grid = every seed ran equally often and no trial lacks a seed (or
--                     none has one: each run a config of one seed)
--   best_config_id    the config of the trial with the best value of the search's metric
--                     (policy.search.metric_goal); a tie goes to the lowest config_id. NULL
--                     when no trial with a config_id reports the metric
--   rerun_configs     configs of this search (same config_id) also run in an earlier search of
--                     the same model: one whose first run started strictly earlier (a search
--                     without a model re-runs nothing)
--   rerun_of          for each re-run config, the search of the model that first ran it (the
--                     earliest start, a tie to the lowest search_id), each once: the first 5
--                     by search_id, then "… and N more searches" ("… and 1 more search")
--                     counting the others. Not every earlier search sharing a config: that
--                     paired each (search, config) with all of them - quadratic
--   rerun_cost        the cost of every trial of those configs, all its seeds
--   extra_seed_cost   the cost of every trial that is not its config's first seed (the lowest
--                     seed, else the earliest start, then the lowest run id, of the trial's
--                     runs), for configs other than the best. Without a best config (no
--                     metric) every config's extra seeds count: no result justified
--                     repeating any of them
--   questioned_cost   the cost of the trials in either set, each trial once
--   cost              the search's cost, sweep controllers included (as search_costs)
-- A trial without config_id is never a re-run and never an extra seed.
WITH search_runs AS (
    SELECT * FROM search_runs($month)
),
identity AS (
    SELECT * FROM search_identity($month)
),
active AS (
    SELECT search_id FROM active_searches($month, $month_start, $month_end)
),
trial_runs AS (
    SELECT * FROM search_runs WHERE NOT is_parent
),
active_runs AS (
    -- the trials' runs whose search gets a row: only their shape is worked out
    SELECT * FROM trial_runs WHERE search_id IN (SELECT search_id FROM active)
),
run_spend AS (
    SELECT a.run_id, fsum(a.cost) AS cost
    FROM attribution_runs AS a
    WHERE a.month = $month AND a.run_id IN (SELECT run_id FROM search_runs)
    GROUP BY a.run_id
),
active_trials AS (
    -- each run with its trial (`search_trials`): the run itself, or the first run of the chain
    -- of restarts it continues
    SELECT r.*, t.trial_id
    FROM active_runs AS r
    JOIN search_trials($month, $month_start, $month_end) AS t ON t.run_id = r.run_id
),
trials AS (
    -- one row per trial (its runs share search, config and seed): the seeds and configs below
    -- count trials, not the pieces a restarted trial ran in
    SELECT search_id, trial_id, any_value(config_id) AS config_id, any_value(seed) AS seed,
           min(start_time) AS start_time, min(run_id) AS first_run_id
    FROM active_trials
    GROUP BY search_id, trial_id
),
ranked AS (
    -- each trial's place among its config's trials (seeds are text in the tracker: numeric
    -- ones compare as numbers, "2" before "10", and seeds equal as numbers, "1" and "01",
    -- by their start: macros.sql `seed_key`); a trial without config_id is alone
    SELECT
        search_id, trial_id,
        row_number() OVER (PARTITION BY search_id, config_id,
                                        CASE WHEN config_id IS NULL THEN trial_id END
                           ORDER BY try_cast(seed AS DOUBLE) NULLS LAST,
                                    seed_key(seed) NULLS LAST, start_time, first_run_id)
                                                                                AS seed_rank
    FROM trials
),
seeded AS (
    -- each run with its trial's place: every run of a trial is its first seed, or none is
    SELECT t.search_id, t.run_id, t.trial_id, t.config_id, t.metric_name, t.metric_value,
           r.seed_rank
    FROM active_trials AS t
    JOIN ranked AS r ON r.search_id = t.search_id AND r.trial_id = t.trial_id
),
config_seeds AS (
    -- the seeds of each named config: distinct seeds, each trial without a seed one more
    SELECT search_id, config_id,
           count(DISTINCT seed_key(seed)) + count(*) FILTER (WHERE seed IS NULL) AS seeds
    FROM trials
    WHERE config_id IS NOT NULL
    GROUP BY search_id, config_id
),
named_shape AS (
    -- searches with a config_id: configs are the named ones (search_costs' count)
    SELECT search_id, count(*) AS configs, max(seeds) AS seeds_per_config,
           min(seeds) = max(seeds) AS grid
    FROM config_seeds
    GROUP BY search_id
),
seed_runs AS (
    -- searches without any config_id: how often each seed ran (NULL: the trials without one)
    SELECT search_id, seed, count(*) AS runs
    FROM trials
    WHERE search_id NOT IN (SELECT search_id FROM named_shape)
    GROUP BY search_id, seed
),
unnamed_shape AS (
    -- trials ÷ distinct seeds configs (search_costs), rounded up to a whole number
    SELECT
        search_id,
        (sum(runs) + greatest(count(seed), 1) - 1) // greatest(count(seed), 1) AS configs,
        greatest(count(seed), 1)                                            AS seeds_per_config,
        CASE WHEN count(seed) = 0 THEN true
             ELSE count(*) = count(seed)
                  AND min(runs) FILTER (WHERE seed IS NOT NULL)
                      = max(runs) FILTER (WHERE seed IS NOT NULL) END        AS grid
    FROM seed_runs
    GROUP BY search_id
),
config_shape AS (
    SELECT * FROM named_shape
    UNION ALL BY NAME
    SELECT * FROM unnamed_shape
),
best AS (
    SELECT search_id, config_id AS best_config_id
    FROM (
        SELECT s.search_id, s.config_id, s.metric_value
        FROM seeded AS s
        JOIN identity AS i ON i.search_id = s.search_id
        WHERE s.config_id IS NOT NULL AND s.metric_value IS NOT NULL
          AND NOT isnan(s.metric_value)
          AND (s.metric_name IS NULL OR i.metric_name IS NULL OR s.metric_name = i.metric_name)
    )
    QUALIFY row_number() OVER (
        PARTITION BY search_id
        ORDER BY CASE WHEN $metric_goal = 'min' THEN metric_value ELSE -metric_value END,
                 config_id) = 1
),
model_configs AS (
    -- each config_id a search of a model ran, with when that search started (a search
    -- without a model re-runs nothing: two searches naming none are not one model's, and
    -- short config ids such as "0", "1" made every model-less search re-run the others)
    SELECT DISTINCT t.search_id, t.config_id, i.model, i.search_start
    FROM trial_runs AS t
    JOIN identity AS i ON i.search_id = t.search_id
    WHERE t.config_id IS NOT NULL AND i.model IS NOT NULL
),
first_runs AS (
    -- when each config of a model was first run, and by which search: the earliest start of
    -- a search naming it, a tie to the lowest search_id (as search_trend orders searches)
    SELECT model, config_id, search_start AS first_start, search_id AS first_search_id
    FROM model_configs
    QUALIFY row_number() OVER (PARTITION BY model, config_id
                               ORDER BY search_start NULLS LAST, search_id) = 1
),
rerun_configs AS (
    -- the active searches' configs that a search of the model started strictly earlier ran:
    -- the config's first start is before this search's (never this search's own start).
    -- Every (search, config) was joined to every other search of that config, over the
    -- whole snapshot: 4,400 searches of configs "0" … "9" ran out of memory at 1 GiB
    SELECT m.*, f.first_search_id
    FROM model_configs AS m
    JOIN first_runs AS f ON f.model = m.model AND f.config_id = m.config_id
    WHERE m.search_id IN (SELECT search_id FROM active)
      AND f.first_start < m.search_start
),
reruns AS (
    -- the searches that first ran each active search's re-run configs, each once: at most
    -- one per re-run config. Naming every earlier search of each re-run config paired each
    -- (search, config) with all of them: 4,400 searches of configs "0" … "9" all active in
    -- one month took 7.5-17 s (1.5-5.7 s at 2,000; 42-88 s at 8,800), now 0.1-0.2 s
    SELECT DISTINCT search_id, first_search_id AS earlier_search_id
    FROM rerun_configs
),
flagged AS (
    SELECT
        s.*,
        coalesce(sp.cost, 0)                                        AS cost,
        rc.config_id IS NOT NULL                                    AS is_rerun,
        s.seed_rank > 1 AND s.config_id IS DISTINCT FROM b.best_config_id AS is_extra_seed
    FROM seeded AS s
    LEFT JOIN run_spend AS sp ON sp.run_id = s.run_id
    LEFT JOIN rerun_configs AS rc ON rc.search_id = s.search_id AND rc.config_id = s.config_id
    LEFT JOIN best AS b ON b.search_id = s.search_id
),
shape AS (
    SELECT
        search_id,
        count(DISTINCT trial_id)                                        AS runs,
        count(DISTINCT config_id) FILTER (WHERE is_rerun)               AS rerun_configs,
        count(DISTINCT trial_id) FILTER (WHERE config_id IS NULL)       AS runs_without_config,
        coalesce(fsum(cost) FILTER (WHERE is_rerun), 0)                  AS rerun_cost,
        coalesce(fsum(cost) FILTER (WHERE is_extra_seed), 0)             AS extra_seed_cost,
        coalesce(fsum(cost) FILTER (WHERE is_rerun OR is_extra_seed), 0) AS questioned_cost
    FROM flagged
    GROUP BY search_id
),
earlier AS (
    -- the first 5 first-run searches by id, and how many more: a search re-running the
    -- configs of 1,999 others named them all (13,991 characters, repeated in the lever's
    -- evidence and on the report's page)
    SELECT r.search_id,
           string_agg(r.earlier_search_id, ', ' ORDER BY r.earlier_search_id)
               FILTER (WHERE r.named <= 5)
           || CASE WHEN count(*) > 5
                   THEN ' … and ' || format('{:,}', count(*) - 5) || ' more search'
                        || CASE WHEN count(*) = 6 THEN '' ELSE 'es' END
                   ELSE '' END                                          AS rerun_of
    FROM (SELECT *, row_number() OVER (PARTITION BY search_id ORDER BY earlier_search_id)
                        AS named
          FROM reruns) AS r
    GROUP BY r.search_id
),
spend AS (
    -- all the search's runs, controllers included
    SELECT s.search_id, fsum(sp.cost) AS cost
    FROM search_runs AS s
    JOIN run_spend AS sp ON sp.run_id = s.run_id
    GROUP BY s.search_id
)
SELECT
    CAST($month AS DATE)                        AS month,
    ac.search_id,
    i.model,
    coalesce(sh.runs, 0)                        AS runs,
    coalesce(cs.configs, 0)                     AS configs,
    coalesce(cs.seeds_per_config, 0)            AS seeds_per_config,
    coalesce(cs.grid, false)                    AS grid,
    b.best_config_id,
    coalesce(sh.rerun_configs, 0)               AS rerun_configs,
    e.rerun_of,
    coalesce(sh.runs_without_config, 0)         AS runs_without_config,
    coalesce(sh.rerun_cost, 0)                  AS rerun_cost,
    coalesce(sh.extra_seed_cost, 0)             AS extra_seed_cost,
    coalesce(sh.questioned_cost, 0)             AS questioned_cost,
    coalesce(sp.cost, 0)                        AS cost
FROM active AS ac
LEFT JOIN identity AS i  ON i.search_id  = ac.search_id
LEFT JOIN shape    AS sh ON sh.search_id = ac.search_id
LEFT JOIN config_shape AS cs ON cs.search_id = ac.search_id
LEFT JOIN best     AS b  ON b.search_id  = ac.search_id
LEFT JOIN earlier  AS e  ON e.search_id  = ac.search_id
LEFT JOIN spend    AS sp ON sp.search_id = ac.search_id
