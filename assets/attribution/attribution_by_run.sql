-- The month's attribution summed per run and per group of lines: one row per run | untracked
-- | unallocated × purpose class × component × rule × kind × the line attributes the derived
-- tables ask for: the line's team tag, and for the rows of no run (untracked, unallocated) the
-- resource and the UTC day of the charge start, the list to chase. A run's rows are not split
-- by resource or day: that would leave nearly a group per row (1M lines: 3.6M groups of 5.9M
-- rows, where these keys leave 0.5M). Each key costs: a column a reader needs is added here,
-- with what it does to the group count. The decisions that need no single line
-- (untracked_usage, cost_per_model_monthly, egress, showback, gpu_utilization,
-- preprocessing_waste) read this instead of scanning `attribution` and joining it back to
-- `billing_facts` on x_SourceLine each: at 5M lines it is a few hundred thousand rows
-- instead of ~16M.
--
-- A temp table of the connection (cost_pipeline/attribution.py): the attribution step builds
-- it slice by slice from the rows it writes; a connection that did not run the step builds it
-- from the `attribution` table on first use. A group may have one row per slice: readers sum.
-- Reads the relation `attribution_keyed`: attribution rows with `line_key`, the line's rowid in
-- billing_facts (a CTE the caller puts before this SELECT). Parameters: $month, $slice_start,
-- $slice_end.
SELECT
    CAST($month AS DATE)        AS month,
    a.run_id,
    a.purpose_class,
    a.component,
    a.rule,
    a.kind,
    CASE WHEN a.run_id IS NULL THEN l.ResourceId END AS resource_id,
    CASE WHEN a.run_id IS NULL THEN l.day END        AS day,
    l.tag_team,
    l.line_key IS NOT NULL      AS line_billed,        -- false: the row's line is not in billing_facts
    count(*)                    AS attribution_rows,   -- rows of `attribution`: (line, run) pairs
    fsum(a.cost)                AS cost,
    fsum(a.hours)               AS hours,
    fsum(a.accelerator_hours)   AS accelerator_hours,
    fsum(a.share * l.gigabytes) AS gigabytes           -- NULL: no line of the group is in GB
FROM attribution_keyed AS a
LEFT JOIN (
    SELECT
        rowid AS line_key,
        ResourceId, CAST(ChargePeriodStart AS DATE) AS day,
        nullif(trim(coalesce(Tags['team'], Tags['user_team'], Tags['user:team'])), '')
            AS tag_team,
        CASE WHEN upper(ConsumedUnit) = 'GB' THEN ConsumedQuantity END AS gigabytes
    FROM billing_facts
    WHERE month = $month
      AND ChargePeriodStart >= $slice_start AND ChargePeriodStart < $slice_end
) AS l USING (line_key)  -- LEFT: a row whose line is gone keeps NULL attributes
GROUP BY ALL
