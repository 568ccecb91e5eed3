-- The lines a re-run attributes again when only some runs changed (attribution.py; the runs
-- are attribution_basis.sql's `attribution_changed_runs`: added, removed or with another
-- key). A line's rows depend on the bill, which did not change, and on the runs that claim
-- it; so the lines to redo are those a changed run claimed before or claims now:
--   before - every line the month's rows give a changed run;
--   now    - the compute lines of a resource it lists, within its [start, end); the lines
--            tagged with it; the transfer lines of the buckets of the datasets it reads from
--            another region, within its [start, end); the storage lines of the buckets it
--            holds bytes in;
-- and with each compute line every other compute line of its resource and charge period,
-- which its `d` (the resource's usage hours in that period) is summed over (a bucket's lines
-- share nothing: each storage line is split by bytes, each transfer line by overlap).
-- A bucket's storage lines are split among every run holding bytes in it (often most of the
-- month's runs): they depend on a run only through its being known, its bytes (the
-- listing's, unchanged) and its purpose class, so they are redone only for a run added,
-- removed or with another purpose class. A run whose window alone moved (its end came, or
-- moved, or its start did: attribution_basis.sql `moved`) claims by the overlap of a line's
-- period with its window, so only its lines meeting where the window's ends moved
-- (`attribution_changed_spans`) can have other claims: most of a finished run's lines keep
-- their rows. Lines that are not usage never depend on a run.
-- Each set is a narrow pass over the month's lines (holding every usage line with what the
-- sets test spilled gigabytes at 20M lines). Reads the temp tables of
-- attribution_prepare.sql and attribution_basis.sql, and config_datasets.
-- Parameters: $month, $run_tag.

CREATE OR REPLACE TEMP TABLE attribution_changed AS
SELECT *, key_hash(run_id) AS run_hash FROM attribution_changed_runs;

-- when each changed run's claims may have changed: always, unless only its window moved;
-- then where its start moved and where its end moved
CREATE OR REPLACE TEMP TABLE attribution_changed_spans AS
SELECT run_id, run_hash, TIMESTAMP '-infinity' AS ws, TIMESTAMP 'infinity' AS we
FROM attribution_changed WHERE NOT moved
UNION ALL
SELECT run_id, run_hash, a0, a1 FROM attribution_changed WHERE moved AND a0 < a1
UNION ALL
SELECT run_id, run_hash, b0, b1 FROM attribution_changed WHERE moved AND b0 < b1;

-- the changed runs' rows before
CREATE OR REPLACE TEMP TABLE attribution_before AS
SELECT line_key AS line_hash, run_hash, CAST(rule AS VARCHAR) AS rule,
       CAST(purpose_class AS VARCHAR) AS purpose_class
FROM attribution_rows
WHERE month = $month AND run_hash IN (SELECT run_hash FROM attribution_changed);

-- the changed runs whose storage rows may change: gone, new, or of another purpose class
-- than their rows (a run that had no row before counts as new)
CREATE OR REPLACE TEMP TABLE attribution_storage_changed AS
SELECT c.run_id, c.run_hash
FROM attribution_changed AS c
LEFT JOIN (SELECT key_hash(run_id) AS run_hash,
                  run_purpose_class(purpose, search_id) AS pc
           FROM tracker_runs WHERE month = $month) AS n
  ON n.run_hash = c.run_hash
WHERE n.run_hash IS NULL
   OR NOT EXISTS (SELECT 1 FROM attribution_before AS b
                  WHERE b.run_hash = c.run_hash AND b.purpose_class = n.pc);

-- the lines a changed run has rows on or claims now, each with its resource, period and
-- rule (a table: its real row count plans the joins below, a CTE's estimate did not)
CREATE OR REPLACE TEMP TABLE attribution_affected_seeds AS
WITH
windows AS (
    -- what the changed runs claim now by resource and time: the resources they list
    -- (compute lines, by claim_key) and the buckets of the datasets they read from another
    -- region (transfer lines, by claim_key as rule 5 matches them: an Azure account's id in
    -- any case), within their spans
    SELECT * FROM (
        SELECT rr.resource_id AS claim_key, 'compute' AS rule,
               greatest(rr.rs, sp.ws) AS rs, least(rr.re, sp.we) AS re
        FROM attribution_run_resources AS rr
        JOIN attribution_changed_spans AS sp ON sp.run_id = rr.run_id
        UNION ALL
        SELECT claim_key(ds.bucket), 'bucket_transfer', greatest(k.rs, sp.ws),
               least(k.re, sp.we)
        FROM attribution_claimants AS k
        JOIN attribution_changed_spans AS sp ON sp.run_id = k.run_id
        JOIN config_datasets AS ds
          ON k.dataset = ds.name AND k.region IS NOT NULL
         AND region_key(k.region) <> region_key(ds.region)
    )
    WHERE rs < re
),
before_spans AS (
    -- the lines the changed runs have rows on, within their spans
    SELECT b.line_hash, sp.ws, sp.we
    FROM attribution_before AS b
    JOIN attribution_changed_spans AS sp ON sp.run_hash = b.run_hash
    WHERE b.rule <> 'bucket_storage'
       OR b.run_hash IN (SELECT run_hash FROM attribution_storage_changed)
)
SELECT f.rowid AS line_key, f.ResourceId, f.ChargePeriodStart, f.ChargePeriodEnd,
       attribution_rule(f.ChargeCategory, f.CommitmentDiscountStatus, f.x_ResourceKind,
                        f.x_CostComponent) AS rule
FROM billing_facts AS f
JOIN before_spans AS b ON b.line_hash = key_hash(f.x_SourceLine)
WHERE f.month = $month AND b.ws < f.ChargePeriodEnd AND b.we > f.ChargePeriodStart
UNION
SELECT b.rowid, b.ResourceId, b.ChargePeriodStart, b.ChargePeriodEnd, w.rule
FROM billing_facts AS b
JOIN windows AS w ON w.claim_key = claim_key(b.ResourceId)
WHERE b.month = $month AND w.rs < b.ChargePeriodEnd AND w.re > b.ChargePeriodStart
  AND attribution_rule(b.ChargeCategory, b.CommitmentDiscountStatus, b.x_ResourceKind,
                       b.x_CostComponent) = w.rule
UNION
SELECT f.rowid, f.ResourceId, f.ChargePeriodStart, f.ChargePeriodEnd,
       attribution_rule(f.ChargeCategory, f.CommitmentDiscountStatus, f.x_ResourceKind,
                        f.x_CostComponent)
FROM billing_facts AS f
JOIN attribution_changed_spans AS sp ON sp.run_id = user_tag(f.Tags, $run_tag)
WHERE f.month = $month AND f.Tags IS NOT NULL
  AND CASE attribution_rule(f.ChargeCategory, f.CommitmentDiscountStatus, f.x_ResourceKind,
                            f.x_CostComponent)
          WHEN 'non_usage' THEN false
          -- a tagged storage line is the run's whatever its window
          WHEN 'bucket_storage'
              THEN sp.run_id IN (SELECT run_id FROM attribution_storage_changed)
          ELSE sp.ws < f.ChargePeriodEnd AND sp.we > f.ChargePeriodStart END
UNION
SELECT rowid, ResourceId, ChargePeriodStart, ChargePeriodEnd, 'bucket_storage'
FROM billing_facts
WHERE month = $month
  AND ResourceId IN (SELECT bucket FROM attribution_run_bytes
                     WHERE run_hash IN (SELECT run_hash FROM attribution_storage_changed))
  AND attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind,
                       x_CostComponent) = 'bucket_storage';

CREATE OR REPLACE TEMP TABLE attribution_affected AS
WITH
periods AS (
    -- by the resource's claim key, as d sums its hours (an Azure id in two cases is one VM)
    SELECT DISTINCT claim_key(ResourceId) AS claim_key, ChargePeriodStart, ChargePeriodEnd
    FROM attribution_affected_seeds
    WHERE ResourceId IS NOT NULL AND rule = 'compute'
),
lines AS (
    SELECT line_key FROM attribution_affected_seeds
    UNION
    SELECT b.rowid
    FROM billing_facts AS b
    SEMI JOIN periods AS p
      ON p.claim_key = claim_key(b.ResourceId) AND p.ChargePeriodStart = b.ChargePeriodStart
     AND p.ChargePeriodEnd = b.ChargePeriodEnd
    WHERE b.month = $month
      AND attribution_rule(b.ChargeCategory, b.CommitmentDiscountStatus, b.x_ResourceKind,
                           b.x_CostComponent) = 'compute'
)
SELECT rowid AS line_key, key_hash(x_SourceLine) AS line_hash,
       claim_key(ResourceId) AS claim_key
FROM billing_facts
WHERE month = $month AND rowid IN (SELECT line_key FROM lines);
