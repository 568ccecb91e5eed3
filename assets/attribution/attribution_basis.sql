-- What a month's attribution depends on besides its bill, its listing and the config, per
-- run (attribution.py keeps it in `attribution_basis`): a re-run whose bill, listing, config
-- and code are unchanged attributes again only the lines of the runs whose key changed.
--   run_key    - a hash of everything of the run the rows read: its purpose and search (the
--                purpose class), whether it claims (a sweep parent or an unended finished run
--                does not) and its claim: GPUs, listed resources, region, dataset, start, end
--   claim_keys - the resources it claims compute on (`claim_key` of each listed id): the
--                lines of those resources are the ones its change can move
-- A run's membership of the month is its row: a run added or gone changes the bucket lines
-- (storage split by the runs' bytes, transfer by the runs reading a dataset).
-- Reads `attribution_claimants` (attribution_prepare.sql). Parameters: $month.
CREATE OR REPLACE TEMP TABLE attribution_basis_now AS
WITH runs AS (
    SELECT run_id, list(hash(purpose, search_id) ORDER BY hash(purpose, search_id)) AS purposes
    FROM tracker_runs
    WHERE month = $month
    GROUP BY run_id
),
claims AS (
    SELECT
        run_id,
        list(hash(gpus, resource_ids, region, dataset, rs, re)
             ORDER BY hash(gpus, resource_ids, region, dataset, rs, re)) AS claims,
        list_sort(list_distinct(flatten(list(list_transform(resource_ids,
                                                            lambda x: claim_key(x)))))) AS claim_keys
    FROM attribution_claimants
    GROUP BY run_id
)
SELECT
    r.run_id,
    hash(r.purposes, c.claims) AS run_key,
    coalesce(c.claim_keys, []) AS claim_keys
FROM runs AS r
LEFT JOIN claims AS c USING (run_id);

-- the runs whose key changed since the stored basis, with their old and new claim keys: an
-- added run (new row only), a removed one (old row only), a changed one (both)
CREATE OR REPLACE TEMP TABLE attribution_changed_runs AS
SELECT run_id, claim_keys
FROM attribution_basis AS b
WHERE b.month = $month AND b.run_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM attribution_basis_now AS n
                  WHERE n.run_id = b.run_id AND n.run_key = b.run_key)
UNION ALL
SELECT run_id, claim_keys
FROM attribution_basis_now AS n
WHERE NOT EXISTS (SELECT 1 FROM attribution_basis AS b
                  WHERE b.month = $month AND b.run_id = n.run_id AND b.run_key = n.run_key);
