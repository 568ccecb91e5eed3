-- Every billed cost of the month → a run, `untracked` or `unallocated` (SPEC §6), from the
-- claims that `attribution_claims.sql` left in temp tables. Shares summing above 1 are
-- scaled down (over-claimed); what is left below 1 is `untracked`. Lines that are not usage
-- (tax, credits, purchases, unused commitment) are `unallocated`.
-- One slice of the month at a time (the lines whose charge period starts in
-- [$slice_start, $slice_end)), of those `in_attribution_scope` (macros.sql).
-- Parameters: $month, $slice_start, $slice_end.
WITH
lines AS NOT MATERIALIZED (
    -- read where used (three times): a scan of the month is cheaper than holding it
    SELECT
        rowid AS line_key,
        key_hash(x_SourceLine) AS line_hash,  -- stored as attribution_rows.line_key
        ResourceId,
        coalesce(x_SplitParent, false) AS split_parent,
        EffectiveCost AS c, x_AcceleratorCount AS g,
        x_UsageHours AS usage_hours, x_ResourceKind AS resource_kind,
        -- the ENUMs of attribution_rows, cast here once per line rather than per row (about
        -- 3 rows a line): 0.2 s a slice of 1.6M lines
        CAST(x_CostComponent AS attribution_component) AS component,
        CAST(attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind,
                              x_CostComponent) AS attribution_rule) AS rule,
        CASE
            WHEN CommitmentDiscountStatus = 'Unused' THEN 'unused_commitment'
            WHEN ChargeClass = 'Correction' THEN 'correction'
            ELSE lower(ChargeCategory)
        END AS non_usage_kind
    FROM billing_facts
    WHERE month = $month
      AND ChargePeriodStart >= $slice_start AND ChargePeriodStart < $slice_end
      AND in_attribution_scope(rowid)
),
run_rows AS (
    -- a run's purpose class is joined here, to the run rows only (the others have no run)
    SELECT
        l.line_hash, l.component, l.c, l.usage_hours, l.g, l.rule,
        cl.run_hash, t.claimed_share,
        CASE WHEN t.claimed_share > 1 + 1e-12 THEN cl.raw_share / t.claimed_share
             ELSE cl.raw_share END AS share,
        CAST(NULL AS VARCHAR) AS kind,
        -- (claims are on usage lines only: a run row is never unallocated)
        coalesce(r.purpose_class, 'other'::attribution_purpose_class) AS purpose_class
    FROM attribution_claims cl
    JOIN attribution_claimed t USING (line_key)
    JOIN lines l USING (line_key)
    LEFT JOIN (SELECT key_hash(run_id) AS run_hash,
                      CAST(run_purpose_class(purpose, search_id) AS attribution_purpose_class)
                          AS purpose_class
               FROM tracker_runs WHERE month = $month) r
      ON r.run_hash = cl.run_hash
),
untracked_rows AS (
    SELECT
        l.line_hash, l.component, l.c, l.usage_hours, l.g, l.rule,
        CAST(NULL AS UBIGINT) AS run_hash, coalesce(t.claimed_share, 0) AS claimed_share,
        1 - coalesce(t.claimed_share, 0) AS share,
        CASE
            -- an instance whose pods took their split cost: what is left is its unused
            -- capacity, claimed by a run listing the instance or not
            WHEN coalesce(t.claimed_share, 0) > 0 OR l.split_parent THEN 'idle_capacity'
            WHEN l.ResourceId IS NULL OR l.resource_kind = 'shared' THEN 'shared'
            ELSE 'no_run'
        END AS kind,
        'untracked'::attribution_purpose_class AS purpose_class
    FROM lines l
    LEFT JOIN attribution_claimed t USING (line_key)
    WHERE l.rule <> 'non_usage' AND 1 - coalesce(t.claimed_share, 0) > 1e-12
),
unallocated_rows AS (
    SELECT l.line_hash, l.component, l.c, l.usage_hours, l.g, l.rule,
           CAST(NULL AS UBIGINT) AS run_hash, CAST(NULL AS DOUBLE) AS claimed_share,
           1.0 AS share, l.non_usage_kind AS kind,
           'unallocated'::attribution_purpose_class AS purpose_class
    FROM lines l
    WHERE l.rule = 'non_usage'
),
all_rows AS (
    SELECT * FROM run_rows
    UNION ALL BY NAME SELECT * FROM untracked_rows
    UNION ALL BY NAME SELECT * FROM unallocated_rows
)
SELECT
    CAST($month AS DATE) AS month,
    a.line_hash AS line_key,  -- the view `attribution` shows the line's x_SourceLine
    a.run_hash,  -- the view shows the run's run_id
    a.purpose_class,
    a.component,
    a.c * a.share AS cost,
    a.share * a.usage_hours AS hours,
    a.share * a.usage_hours * a.g AS accelerator_hours,
    a.share,
    a.claimed_share,
    a.rule,
    a.kind
FROM all_rows a
