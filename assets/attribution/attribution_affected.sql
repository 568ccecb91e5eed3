-- The lines a re-run attributes again when some runs changed and nothing else did
-- (attribution_basis.sql's `attribution_changed_runs`): the usage lines of every resource a
-- changed run claims, before or after its change; the lines tagged with a changed run; every
-- bucket line (storage is split by the bytes of all the month's runs, transfer by all the
-- runs reading a dataset); and with each of these, every other usage line of its resource
-- (a line's d is summed over its resource's lines of the period, and their shares move
-- together). Lines that are not usage never depend on a run.
-- Parameters: $month, $run_tag.
CREATE OR REPLACE TEMP TABLE attribution_affected AS
WITH usage_lines AS NOT MATERIALIZED (
    SELECT rowid AS line_rowid, x_SourceLine, ResourceId,
           coalesce(Tags[$run_tag], Tags['user_' || $run_tag], Tags['user:' || $run_tag])
               AS tag_run,
           attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind,
                            x_CostComponent) AS rule
    FROM billing_facts
    WHERE month = $month
      AND attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind,
                           x_CostComponent) <> 'non_usage'
),
seeds AS (
    SELECT line_rowid, ResourceId
    FROM usage_lines
    WHERE rule IN ('bucket_storage', 'bucket_transfer')
       OR claim_key(ResourceId) IN (SELECT unnest(claim_keys) FROM attribution_changed_runs)
       OR tag_run IN (SELECT run_id FROM attribution_changed_runs)
)
SELECT line_rowid, hash(x_SourceLine) AS line_hash
FROM usage_lines
WHERE line_rowid IN (SELECT line_rowid FROM seeds)
   OR ResourceId IN (SELECT ResourceId FROM seeds WHERE ResourceId IS NOT NULL);
