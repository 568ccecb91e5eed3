-- What the month's attribution needs once, before its basis (`attribution_basis.sql`) and
-- its slices (`attribution_claims.sql`): the claimants and the resources they list (the
-- macros are `macros.sql`'s). Parameters: $month, $month_end.

-- Sweep controllers (parents of other runs) and finished runs without an end claim no
-- compute or transfer; a RUNNING run is taken to run until the end of the month.
-- (macros.sql `claimant_runs`, which reconciliation reads too).
CREATE OR REPLACE TEMP TABLE attribution_claimants AS
SELECT run_id, key_hash(run_id) AS run_hash, gpus, resource_ids, region, dataset, rs, re
FROM claimant_runs($month, $month_end);

CREATE OR REPLACE TEMP TABLE attribution_run_resources AS
SELECT DISTINCT k.run_id, k.run_hash, unnest(claim_keys(listed)) AS resource_id, k.rs, k.re,
                k.gpus
FROM (SELECT *, unnest(resource_ids) AS listed FROM attribution_claimants) k;
