-- What a month's attribution depends on besides its bill, its listing and the config, per
-- run (attribution.py keeps it in `attribution_basis`): a re-run whose bill, listing, config,
-- code and run keys are all unchanged keeps the month's rows.
--   run_key   - a hash of everything of the run the rows read: its purpose and search (the
--               purpose class), whether it claims (a sweep parent or an unended finished run
--               does not) and its claim: GPUs, listed resources, region, dataset, start, end.
--               Its model, team, metrics … are not in it: the rows do not depend on them.
--   shape_key - the same without the start and end; rs, re - its window, when it claims.
-- A text is hashed with its reversed text too (warehouse.py `row_hash`): DuckDB's hash of a
-- text alone is equal for texts such as `sweep-10/trial-30` and `sweep-17/trial-40`.
-- A run's membership of the month is its row: a run added or gone is a change.
-- Reads `attribution_claimants` (attribution_prepare.sql). Parameters: $month.
CREATE OR REPLACE TEMP TABLE attribution_basis_now AS
WITH runs AS (
    SELECT run_id, list(h ORDER BY h) AS purposes
    FROM (SELECT run_id, hash(purpose, search_id, reverse(search_id)) AS h
          FROM tracker_runs
          WHERE month = $month)
    GROUP BY run_id
),
claims AS (
    SELECT run_id,
           list(hash(shape, rs, re) ORDER BY hash(shape, rs, re)) AS claims,
           list(shape ORDER BY shape) AS shapes,
           -- (one claim per run: tracker_runs holds a run once)
           CASE WHEN count(*) = 1 THEN min(rs) END AS rs,
           CASE WHEN count(*) = 1 THEN min(re) END AS re
    FROM (SELECT run_id, rs, re,
                 hash(gpus, resource_ids, region, dataset,
                      list_transform(resource_ids, lambda item: reverse(item)), reverse(region),
                      reverse(dataset)) AS shape
          FROM attribution_claimants)
    GROUP BY run_id
)
SELECT r.run_id, hash(r.purposes, c.claims) AS run_key, hash(r.purposes, c.shapes) AS shape_key,
       c.rs, c.re
FROM runs AS r
LEFT JOIN claims AS c USING (run_id);

-- the runs whose key changed since the stored basis: added, removed or changed. `moved`: only
-- its window moved (the same shape, a window before and now), and [a0, a1), [b0, b1) are
-- where its start and its end moved: a line whose period meets neither has the same overlap
-- with the run's window as before, so the same claim (attribution_affected.sql)
CREATE OR REPLACE TEMP TABLE attribution_changed_runs AS
WITH before AS (
    SELECT run_id, run_key, shape_key, rs, re
    FROM attribution_basis
    WHERE month = $month AND run_id IS NOT NULL
)
SELECT
    coalesce(n.run_id, b.run_id) AS run_id,
    coalesce(b.shape_key = n.shape_key AND b.rs < b.re AND n.rs < n.re, false) AS moved,
    least(b.rs, n.rs) AS a0, greatest(b.rs, n.rs) AS a1,
    least(b.re, n.re) AS b0, greatest(b.re, n.re) AS b1
FROM before AS b
FULL JOIN attribution_basis_now AS n ON n.run_id = b.run_id
WHERE b.run_key IS DISTINCT FROM n.run_key;
