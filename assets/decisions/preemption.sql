-- Preemption: chains of runs restarted after an interruption, with spot compute this month,
-- what restarting from scratch repeated, and the chain against what its last run alone would
-- have cost on demand (SPEC §12) — the lever "checkpoint before going preemptible" is
-- Σ lost_cost.
--
-- Definitions (the month's tracker snapshot, one row per run; costs are this month's
-- attribution):
--   chain           a run and every run that restarts it through `restart_of`, transitively;
--                   `chain_id` = its first run: the run reached by following restart_of up
--                   while it names a known run (a restart_of naming an unknown run, or the
--                   run itself, ends the walk there); runs restarting each other in a cycle
--                   are one chain whose first run is the cycle's earliest start
--   listed          chains with spot compute this month: a compute row (attribution rule
--                   `compute`) of one of its runs on a billing line priced `spot`
--   runs            the chain's runs in the snapshot (any month)
--   restarts        its runs with a restart_of; restarts_from_scratch: those with an empty
--                   resumed_from
--   cost            Σ the chain's runs' attributed cost this month, every component
--   lost_cost       Σ this month's cost of every run a from-scratch restart repeated (the run
--                   its restart_of names), each run once
--   on_demand_cost  Σ over the chain's compute rows of the row's share × the line's ListCost
--                   (share is the row's final share of the line, so a line whose
--                   EffectiveCost is 0 still prices); NULL when one of those lines has no
--                   ListCost (the source does not state the public price)
--   last runs       the chain's runs started at its latest start: one, or several restarts
--                   launched at one instant (none of them is "the" last: settled by run id,
--                   the figures below followed the runs' names)
--   last_run_id     the first of the last runs by run id (the figure covers them all)
--   last_run_on_demand_cost  the same as on_demand_cost for the last runs alone, together;
--                   NULL when one of them has no compute row this month (it starts in a later
--                   month, or lists no billed resource): there is nothing, or only a part of
--                   the last runs, to compare with
--   spot_cost_more_than_on_demand  cost > last_run_on_demand_cost: cost minus it, to 10
--                   decimal places (CUR's own precision for amounts), above 1e-12 of the larger
--                   of the two. Equal amounts summed differently are equal at any size: 1.10 +
--                   2.20 against 3.30, and 1,100,000.10 + 2,200,000.20 (3300000.3000000003 in
--                   doubles) against 3,300,000.30, where 10 decimals alone do not reach a
--                   double's spacing; a cent more is more up to $1e9. NULL when that is NULL
WITH runs AS (
    SELECT run_id, model, start_time, resumed_from,
           CASE WHEN restart_of <> run_id THEN restart_of END AS restart_of,
           key_hash(run_id) AS run_hash  -- as attribution_rows names the run
    FROM month_runs($month)
),
restarts AS (
    -- the runs whose restart_of names a known run, each with it (`parent`): every other run is
    -- the first run of its own chain, and walking it would only find itself (a month of a
    -- million runs walked them all, and then summed and ranked every chain, 1.3 s for no spot
    -- line at all)
    SELECT run_id, restart_of AS parent FROM runs WHERE restart_of IN (SELECT run_id FROM runs)
),
members AS (
    -- every run and its chain: a restart's its chain's first run (macros.sql `chain_roots`:
    -- the walk up restart_of, a cycle's earliest start), any other run's is itself
    SELECT coalesce(c.root, r.run_id) AS chain_id, r.*
    FROM runs AS r
    LEFT JOIN chain_roots('restarts', 'runs') AS c USING (run_id)
),
spot_lines AS MATERIALIZED (
    SELECT key_hash(x_SourceLine) AS line_key
    FROM billing_facts WHERE month = $month AND x_PricingCategory = 'spot'
),
spot_runs AS MATERIALIZED (
    -- the runs with compute rows on the (few) spot lines, found from those lines first, so
    -- that only their chains' compute rows are priced below, not every run's (a month
    -- without spot lines reads no attribution row here). Materialized, as are the two CTEs
    -- below: the planner then hashes these few rows; left to it, in a run that had just
    -- written the month's rows it joined every compute row to the runs first and hashed
    -- that (0.7 s at 5M lines, 3 s at 20M, for no spot line at all)
    SELECT DISTINCT a.run_hash
    FROM attribution_rows AS a
    WHERE a.month = $month AND a.rule = 'compute' AND a.run_hash IS NOT NULL
      AND a.line_key IN (SELECT line_key FROM spot_lines)
      AND EXISTS (SELECT 1 FROM spot_lines)
),
spot_chains AS (
    SELECT DISTINCT chain_id
    FROM members
    WHERE run_hash IN (SELECT run_hash FROM spot_runs)
),
spot_members AS MATERIALIZED (
    -- the listed chains' runs, with what the chain's figures need: all that is summed and
    -- ranked below
    SELECT *
    FROM members
    WHERE chain_id IN (SELECT chain_id FROM spot_chains)
),
spot_run_ids AS MATERIALIZED (
    -- materialized: the semi-join below then hashes these ids, not the month's per-run sums
    -- (it did, 0.2 s at a million runs, for no spot line at all)
    SELECT DISTINCT run_id FROM spot_members
),
run_spend AS (
    SELECT run_id, fsum(cost) AS cost
    FROM attribution_runs  -- the month's attribution summed per run (attribution_runs.sql)
    WHERE month = $month AND run_id IN (SELECT run_id FROM spot_run_ids)
    GROUP BY run_id
),
compute_rows AS (
    -- the listed chains' compute rows, their runs found first by a semi-join that hashes the
    -- listed runs: the planner hashes the smaller side by its estimates, and `members` comes
    -- out of the recursive walk estimated at millions of rows. Joined to it directly, or
    -- semi-joined to its run hashes, the month's compute rows were hashed instead once a
    -- partial re-run had deleted and written them again (0.25–0.41 s against 0.08 s at 2M
    -- and 5M lines, for no spot line at all); the runs' own hashes come from `runs`, which
    -- is estimated as the month's tracker rows (the same rows either way)
    SELECT m.chain_id, m.run_id, a.line_key, a.share
    FROM (SELECT run_hash, line_key, share
          FROM attribution_rows
          WHERE month = $month AND rule = 'compute'
            AND run_hash IN (SELECT r.run_hash FROM runs AS r
                             WHERE r.run_id IN (SELECT run_id FROM spot_members))) AS a
    JOIN spot_members AS m ON m.run_hash = a.run_hash
),
line_keys AS MATERIALIZED (
    -- materialized: the semi-join below then hashes these keys, not the month's lines (it
    -- did, 1.4 s at 5M and 7 s at 20M, in a run that had just re-attributed the month: the
    -- rows deleted and written again in one transaction double the table's estimate)
    SELECT DISTINCT line_key FROM compute_rows
),
lines AS (
    -- a month's line ids are unique (ingest keeps an identical duplicate once and refuses a
    -- conflicting one), as are their hashes (ingest refuses a month where two share one)
    SELECT key_hash(x_SourceLine) AS line_key, ListCost, x_PricingCategory
    FROM billing_facts
    WHERE month = $month AND key_hash(x_SourceLine) IN (SELECT line_key FROM line_keys)
),
last_runs AS (
    -- the chain's last runs: every run started at its latest start. Two restarts launched at
    -- one instant are both last; settled by run id, the figure and the comparison followed the
    -- runs' names
    SELECT chain_id, run_id
    FROM spot_members
    QUALIFY start_time = max(start_time) OVER (PARTITION BY chain_id)
),
last_run_names AS (
    -- `last_run_id`: the first of them by id, and how many the figure covers
    SELECT chain_id, min(run_id) AS last_run_id, count(*) AS last_runs
    FROM last_runs
    GROUP BY chain_id
),
priced AS (
    SELECT c.chain_id, c.run_id, c.share * l.ListCost AS on_demand, l.ListCost IS NULL AS unpriced,
           l.x_PricingCategory = 'spot' AS spot,
           c.run_id IN (SELECT run_id FROM last_runs) AS last
    FROM compute_rows AS c
    JOIN lines AS l USING (line_key)
),
repeated AS (
    -- the runs a from-scratch restart repeated
    SELECT DISTINCT restart_of AS run_id
    FROM runs
    WHERE restart_of IS NOT NULL AND resumed_from IS NULL
),
per_chain AS (
    SELECT
        m.chain_id,
        coalesce(max(m.model) FILTER (WHERE m.run_id = m.chain_id), min(m.model)) AS model,
        count(*)                                                                AS runs,
        count(*) FILTER (WHERE m.restart_of IS NOT NULL)                        AS restarts,
        count(*) FILTER (WHERE m.restart_of IS NOT NULL AND m.resumed_from IS NULL)
                                                                                AS restarts_from_scratch,
        coalesce(fsum(s.cost), 0)                                                AS cost,
        coalesce(fsum(s.cost) FILTER (WHERE m.run_id IN (SELECT run_id FROM repeated)), 0)
                                                                                AS lost_cost
    FROM spot_members AS m
    LEFT JOIN run_spend AS s ON s.run_id = m.run_id
    GROUP BY m.chain_id
),
on_demand AS (
    SELECT
        p.chain_id,
        bool_or(p.spot)                                                         AS spot,
        CASE WHEN NOT bool_or(p.unpriced) THEN fsum(p.on_demand) END             AS on_demand_cost,
        -- the last runs priced together; NULL, not 0, when one of them has no compute row
        -- this month (it starts in a later month, or lists no billed resource): nothing, or
        -- only a part of the last runs, to compare the chain with
        CASE WHEN NOT bool_or(p.unpriced) FILTER (WHERE p.last)
                  AND count(DISTINCT p.run_id) FILTER (WHERE p.last) = any_value(l.last_runs)
             THEN fsum(p.on_demand) FILTER (WHERE p.last) END
                                                                                AS last_run_on_demand_cost
    FROM priced AS p
    JOIN last_run_names AS l USING (chain_id)
    GROUP BY p.chain_id
)
SELECT
    CAST($month AS DATE) AS month,
    c.chain_id,
    c.model,
    c.runs,
    c.restarts,
    c.restarts_from_scratch,
    c.cost,
    c.lost_cost,
    o.on_demand_cost,
    l.last_run_id,
    o.last_run_on_demand_cost,
    over_limit(c.cost - o.last_run_on_demand_cost,
               greatest(abs(c.cost), abs(o.last_run_on_demand_cost)))
                                                             AS spot_cost_more_than_on_demand
FROM per_chain AS c
JOIN on_demand AS o USING (chain_id)
JOIN last_run_names AS l USING (chain_id)
WHERE o.spot
ORDER BY c.chain_id
