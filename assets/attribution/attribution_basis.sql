-- What a month's attribution depends on besides its bill, its listing and the config, per
-- run (attribution.py keeps it in `attribution_basis`): a re-run whose bill, listing, config,
-- code and run keys are all unchanged keeps the month's rows.
--   run_key - a hash of everything of the run the rows read: its purpose and search (the
--             purpose class), whether it claims (a sweep parent or an unended finished run
--             does not) and its claim: GPUs, listed resources, region, dataset, start, end.
--             Its model, team, metrics … are not in it: the rows do not depend on them.
-- A run's membership of the month is its row: a run added or gone is a change.
-- Reads `attribution_claimants` (attribution_prepare.sql). Parameters: $month.
CREATE OR REPLACE TEMP TABLE attribution_basis_now AS
WITH runs AS (
    SELECT run_id, list(hash(purpose, search_id) ORDER BY hash(purpose, search_id)) AS purposes
    FROM tracker_runs
    WHERE month = $month
    GROUP BY run_id
),
claims AS (
    SELECT run_id,
           list(hash(gpus, resource_ids, region, dataset, rs, re)
                ORDER BY hash(gpus, resource_ids, region, dataset, rs, re)) AS claims
    FROM attribution_claimants
    GROUP BY run_id
)
SELECT r.run_id, hash(r.purposes, c.claims) AS run_key
FROM runs AS r
LEFT JOIN claims AS c USING (run_id);

-- the runs whose key changed since the stored basis: added, removed or changed
CREATE OR REPLACE TEMP TABLE attribution_changed_runs AS
SELECT run_id
FROM attribution_basis AS b
WHERE b.month = $month AND b.run_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM attribution_basis_now AS n
                  WHERE n.run_id = b.run_id AND n.run_key = b.run_key)
UNION
SELECT run_id
FROM attribution_basis_now AS n
WHERE NOT EXISTS (SELECT 1 FROM attribution_basis AS b
                  WHERE b.month = $month AND b.run_id = n.run_id AND b.run_key = n.run_key);
