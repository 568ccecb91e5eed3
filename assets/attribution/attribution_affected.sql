-- The lines a re-run attributes again when only some runs changed (attribution.py; the runs
-- are attribution_basis.sql's `attribution_changed_runs`: added, removed or with another
-- key). A line's rows depend on the bill, which did not change, and on the runs that claim
-- it; so the lines to redo are those a changed run claimed before or claims now:
--   before - every line the month's rows give a changed run;
--   now    - the compute lines of a resource it lists, within its [start, end); the lines
--            tagged with it; the transfer lines of the buckets of the datasets it reads from
--            another region, within its [start, end); the storage lines of the buckets it
--            holds bytes in;
-- and with each line every other line of its resource and charge period, which its `d`
-- (the resource's usage hours in that period) is summed over. A bucket's storage lines are
-- split among every run holding bytes in it (often most of the month's runs): they depend
-- on a run only through its being known, its bytes (the listing's, unchanged) and its
-- purpose class, so they are redone only for a run added, removed or with another purpose
-- class. Lines that are not usage never depend on a run. Reads the temp tables of
-- attribution_prepare.sql and attribution_basis.sql, and config_datasets.
-- Parameters: $month, $run_tag.
CREATE OR REPLACE TEMP TABLE attribution_affected AS
WITH
usage_lines AS MATERIALIZED (
    SELECT
        rowid AS line_key,
        hash(x_SourceLine) AS line_hash,
        ResourceId, ChargePeriodStart AS s, ChargePeriodEnd AS e,
        claim_key(ResourceId) AS claim_key,
        user_tag(Tags, $run_tag) AS tag_run,
        attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind,
                         x_CostComponent) AS rule
    FROM billing_facts
    WHERE month = $month
      AND attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind,
                           x_CostComponent) <> 'non_usage'
),
changed AS (
    SELECT run_id, hash(run_id) AS run_hash FROM attribution_changed_runs
),
before_rows AS MATERIALIZED (
    SELECT line_key AS line_hash, run_hash, CAST(rule AS VARCHAR) AS rule,
           CAST(purpose_class AS VARCHAR) AS purpose_class
    FROM attribution_rows
    WHERE month = $month AND run_hash IN (SELECT run_hash FROM changed)
),
-- the changed runs whose storage rows may change: gone, new, or of another purpose class
-- than their rows (a run that had no row before counts as new)
storage_changed AS MATERIALIZED (
    SELECT c.run_id, c.run_hash
    FROM changed AS c
    LEFT JOIN (SELECT hash(run_id) AS run_hash, run_purpose_class(purpose, search_id) AS pc
               FROM tracker_runs WHERE month = $month) AS n
      ON n.run_hash = c.run_hash
    WHERE n.run_hash IS NULL
       OR NOT EXISTS (SELECT 1 FROM before_rows AS b
                      WHERE b.run_hash = c.run_hash AND b.purpose_class = n.pc)
),
seeds AS (
    SELECT u.line_key
    FROM usage_lines AS u
    WHERE u.line_hash IN (
        SELECT line_hash FROM before_rows
        WHERE rule <> 'bucket_storage'
           OR run_hash IN (SELECT run_hash FROM storage_changed))
    UNION
    SELECT u.line_key
    FROM usage_lines AS u
    JOIN attribution_run_resources AS rr ON rr.resource_id = u.claim_key
    WHERE u.rule = 'compute' AND rr.run_id IN (SELECT run_id FROM changed)
      AND rr.rs < u.e AND rr.re > u.s
    UNION
    SELECT u.line_key
    FROM usage_lines AS u
    WHERE u.tag_run IN (SELECT run_id FROM changed)
      AND (u.rule <> 'bucket_storage' OR u.tag_run IN (SELECT run_id FROM storage_changed))
    UNION
    SELECT u.line_key
    FROM usage_lines AS u
    JOIN config_datasets AS ds ON ds.bucket = u.ResourceId
    JOIN attribution_claimants AS k
      ON k.dataset = ds.name AND k.region IS NOT NULL AND k.region <> ds.region
    WHERE u.rule = 'bucket_transfer' AND k.run_id IN (SELECT run_id FROM changed)
      AND k.rs < u.e AND k.re > u.s
    UNION
    SELECT u.line_key
    FROM usage_lines AS u
    WHERE u.rule = 'bucket_storage'
      AND u.ResourceId IN (SELECT bucket FROM attribution_run_bytes
                           WHERE run_hash IN (SELECT run_hash FROM storage_changed))
),
seed_lines AS MATERIALIZED (
    SELECT u.* FROM usage_lines AS u WHERE u.line_key IN (SELECT line_key FROM seeds)
),
periods AS (
    SELECT DISTINCT ResourceId, s, e FROM seed_lines WHERE ResourceId IS NOT NULL
)
SELECT line_key, line_hash, claim_key FROM seed_lines
UNION
SELECT u.line_key, u.line_hash, u.claim_key
FROM usage_lines AS u
SEMI JOIN periods AS p ON p.ResourceId = u.ResourceId AND p.s = u.s AND p.e = u.e;
